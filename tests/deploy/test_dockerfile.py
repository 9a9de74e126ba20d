"""deploy/Dockerfile, checked as far as a machine without a Docker daemon can: what it installs and how (uv from its
image, the lock file honoured, no dev tools, a user without privileges, a volume for the SQLite file), and its
command run the same way outside a container: it starts, its HEALTHCHECK passes, and SIGTERM stops it cleanly."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from streamrelay.config.settings import ServiceSettings
from tests.deploy.support import DEPLOY, ROOT, cli_accepts, started
from tests.ports import free_port

pytestmark = pytest.mark.timeout(120)

DOCKERFILE = DEPLOY / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` in order, continuation lines joined, comments left out."""
    joined: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pending = f"{pending} {line}".strip()
        if pending.endswith("\\"):
            pending = pending[:-1].strip()
            continue
        joined.append(pending)
        pending = ""
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in joined]


def of(name: str) -> list[str]:
    return [arguments for instruction, arguments in instructions() if instruction == name]


def env() -> dict[str, str]:
    """The runtime stage's ENV (the last stage's: after the last FROM)."""
    steps = instructions()
    last_from = max(i for i, (instruction, _) in enumerate(steps) if instruction == "FROM")
    values: dict[str, str] = {}
    for instruction, arguments in steps[last_from:]:
        if instruction == "ENV":
            values.update(dict(part.split("=", 1) for part in shlex.split(arguments)))
    return values


def exec_form(arguments: str) -> list[str]:
    value = json.loads(arguments)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), arguments
    return value


def test_it_builds_on_a_slim_python_with_uv_from_its_image_and_the_lock_file_honoured() -> None:
    (python,) = [a.split("=", 1)[1] for a in of("ARG") if a.startswith("PYTHON_IMAGE=")]
    assert re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", python)
    assert all(a.split()[0] == "${PYTHON_IMAGE}" for a in of("FROM"))
    assert any(re.match(r"--from=ghcr\.io/astral-sh/uv:[\d.]+ /uv /uvx /bin/", a) for a in of("COPY"))
    syncs = [a for a in of("RUN") if "uv sync" in a]
    assert len(syncs) == 2 and all("uv sync --frozen --no-dev" in a for a in syncs)
    assert "--no-install-project" in syncs[0] and "source=uv.lock" in syncs[0]  # dependencies first: a cached layer
    assert (ROOT / "uv.lock").is_file() and (ROOT / "pyproject.toml").is_file()


def test_it_runs_as_a_user_without_privileges_and_keeps_the_ledger_in_a_volume() -> None:
    (user,) = of("USER")
    assert user == "10001:10001"
    assert any("useradd --system --uid 10001" in a for a in of("RUN"))
    (volume,) = of("VOLUME")
    ledger = Path(env()["STREAMRELAY_SERVICE__LEDGER"])
    assert str(ledger.parent) in exec_form(volume)
    assert any(f"chown streamrelay:streamrelay {ledger.parent}" in a for a in of("RUN"))


def test_the_context_leaves_the_local_environment_out_and_keeps_what_the_image_needs() -> None:
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    for entry in (".venv", ".git", "var", "tests/**", "!tests/streams/**"):
        assert entry in ignored
    assert (ROOT / "tests/streams/anthropic/markdown-long-fences.jsonl").is_file()  # the compose bot replays it


def test_the_healthcheck_and_the_exposed_port_are_the_services() -> None:
    (healthcheck,) = of("HEALTHCHECK")
    command = exec_form(healthcheck.split("CMD", 1)[1].strip())
    assert command[0] == "python" and (ROOT / command[1]).is_file()
    assert of("EXPOSE") == [str(ServiceSettings().port)]
    assert of("STOPSIGNAL") == ["SIGTERM"]


def test_the_entrypoint_runs_outside_a_container_answers_its_healthcheck_and_stops_on_sigterm(tmp_path: Path) -> None:
    """``uv run`` + ENTRYPOINT + CMD from the repository root (the image's WORKDIR holds the same files), with the
    image's ENV; only the interface (loopback here), the port and the volume's place differ."""
    (entrypoint,), (cmd,) = of("ENTRYPOINT"), of("CMD")
    argv = [*exec_form(entrypoint), *exec_form(cmd)]
    assert argv[0] == "streamrelay"
    cli_accepts(argv[1:])
    assert set(of("WORKDIR")) == {"/app"}
    port, volume = free_port(), tmp_path / "var-lib-streamrelay"
    image_env = {k: v for k, v in env().items() if k != "PATH"}
    ledger = volume / Path(image_env["STREAMRELAY_SERVICE__LEDGER"]).name
    run_env = {
        **image_env,
        "STREAMRELAY_SERVICE__HOST": "127.0.0.1",
        "STREAMRELAY_SERVICE__PORT": str(port),
        "STREAMRELAY_SERVICE__LEDGER": str(ledger),
        "STREAMRELAY_TOKEN": "docker-entrypoint-test-token",
        "TELEGRAM_BOT_TOKEN": "123456:DRY-run-token-for-the-mock-bot-api",
    }
    with started(["uv", "run", "--frozen", *argv], run_env, tmp_path / "container.log") as service:
        service.wait_http(f"http://127.0.0.1:{port}/readyz")
        health = subprocess.run(
            [sys.executable, *exec_form(of("HEALTHCHECK")[0].split("CMD", 1)[1].strip())[1:]],
            cwd=ROOT,
            env={**os.environ, **run_env},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert health.returncode == 0, health.stderr
        assert service.stop() == 0
    assert ledger.is_file()
    lines = [json.loads(line) for line in service.output().splitlines() if line.startswith("{")]
    assert any(line["event"] == "stopped" for line in lines)  # LOG_FORMAT=json from the image: JSON lines
    assert "docker-entrypoint-test-token" not in service.output()


def test_the_healthcheck_fails_when_nothing_answers() -> None:
    run_env = {**os.environ, "STREAMRELAY_SERVICE__PORT": str(free_port()), "HEALTHCHECK_TIMEOUT_S": "1"}
    done = subprocess.run(
        [sys.executable, str(DEPLOY / "healthcheck.py")], env=run_env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 1 and "/healthz" in done.stderr


def test_every_documented_docker_run_publishes_on_loopback_only() -> None:
    """The Dockerfile's comment and deploy/README.md: ``-p 127.0.0.1:8787:8787``, never ``-p 8787:8787`` (every
    interface, and Docker's own iptables rules bypass the host's firewall)."""
    for path in (DEPLOY / "Dockerfile", DEPLOY / "README.md"):
        runs = [
            line for line in path.read_text().splitlines() if "-p " in line and ("docker run" in line or "-v " in line)
        ]
        assert runs, path
        for line in runs:
            published = line.split("-p ", 1)[1].split()[0]
            assert published.startswith("127.0.0.1:"), f"{path.name}: {line.strip()}"
