"""The CLI as a newcomer meets it in the first hour (issue 14), run as a user runs it (``python -m app``): a replay
before the sidecar listens waits for it, a sidecar that never comes is one line saying what to do, a missing token
says how to set it, a taken port names host:port, a second sidecar on one ledger names the file and the pid of the
first (and after a kill -9 of the first a new one starts), bad option values name the option, and every command's
help reads without markup accidents."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from streamrelay.app.cli import app
from tests.contention import wait_scale
from tests.ports import free_port as _free_port

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "first-hour-ingest-token"
RECORDING = ROOT / "tests" / "streams" / "anthropic" / "markdown-long-fences.jsonl"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMRELAY_")}
    return {**env, "STREAMRELAY_TOKEN": TOKEN, "COLUMNS": "80", **extra}


def _cli(*args: str, env: dict[str, str] | None = None, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamrelay", *args],
        cwd=ROOT,
        env=_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=timeout_s * wait_scale(),
    )


def _config(folder: Path, port: int) -> Path:
    """A web-only sidecar (no platform token needed) whose ledger is relative: beside this file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "channels.toml"
    path.write_text(
        f'[service]\nport = {port}\nledger = "state/ledger.sqlite3"\nactions = ""\n\n'
        '[channels.web]\nplatform = "web"\nthrottle_ms = 50\n',
        encoding="utf-8",
    )
    return path


@contextmanager
def _serving(config: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamrelay", "serve", "--config", str(config), "--log-format", "json"],
            cwd=ROOT,
            env=_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(10)


def _ready(port: int, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 60) -> None:
    timeout_s *= wait_scale()  # a hang guard, scaled as the timeouts are
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"not ready in {timeout_s:g} s: {log.read_text()[-3000:]}")


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_replay_with_no_sidecar_waits_then_says_what_to_do() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    replay = ("replay", str(RECORDING), "--channel", "web", "--chat-id", "42", "--url", url, "--wait-s", "1")
    started = time.monotonic()
    result = _cli(*replay)
    assert result.returncode == 1 and time.monotonic() - started < 30 * wait_scale()  # a hang guard (the CLI's import)
    assert f"waiting for the sidecar at {url}…" in result.stderr.splitlines()
    line = _one_line_error(result)
    assert f"the sidecar at {url} is not reachable" in line
    assert "streamrelay serve" in line and "--url" in line and "STREAMRELAY_URL" in line
    assert len(result.stderr.splitlines()) == 2, result.stderr


def test_replay_without_the_token_says_how_to_set_it() -> None:
    env = {k: v for k, v in _env().items() if k != "STREAMRELAY_TOKEN"}
    result = _cli("replay", str(RECORDING), "--channel", "web", "--chat-id", "42", env=env)
    assert result.returncode == 2
    line = _one_line_error(result)
    assert "STREAMRELAY_TOKEN is not set" in line and "export STREAMRELAY_TOKEN=" in line


def test_replay_started_before_the_sidecar_waits_for_it_and_delivers(tmp_path: Path) -> None:
    port = _free_port()
    config = _config(tmp_path / "etc", port)
    url = f"http://127.0.0.1:{port}"
    replay = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamrelay",
            "replay",
            str(RECORDING),
            "--channel",
            "web",
            "--chat-id",
            "42",
            "--url",
            url,
            "--wait-s",  # the default 10 s, stretched by the load: serve took longer to listen at load ~20 on 2 cores
            f"{10 * wait_scale():g}",
        ],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.5)  # as the README's dry-run block does: serve is still starting
        with _serving(config, tmp_path / "serve.log"):
            out, errors = replay.communicate(timeout=90 * wait_scale())
    finally:
        if replay.poll() is None:
            replay.kill()
    assert replay.returncode == 0, errors[-3000:]
    assert f"waiting for the sidecar at {url}…" in errors
    assert json.loads(out)["status"] == "delivered"
    assert (tmp_path / "etc" / "state" / "ledger.sqlite3").is_file()  # beside the config, not in the cwd


def test_serve_and_mock_on_a_taken_port_name_it_and_what_to_do(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        result = _cli("serve", "--config", str(_config(tmp_path, port)))
        mock = _cli("mock", "telegram", "--port", str(port))
    assert result.returncode == 1
    line = _one_line_error(result)
    assert f"127.0.0.1:{port}" in line and "in use" in line and "--port" in line and "[service] port" in line
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert mock.returncode == 1 and f"127.0.0.1:{port}" in _one_line_error(mock) and "--port" in mock.stderr


def test_a_second_sidecar_on_one_ledger_names_the_file_and_the_first_and_a_kill_frees_it(tmp_path: Path) -> None:
    first_port, second_port = _free_port(), _free_port()
    first_config = _config(tmp_path, first_port)
    with _serving(first_config, tmp_path / "first.log") as first:
        _ready(first_port, first, tmp_path / "first.log")
        second = _cli("serve", "--config", str(first_config), "--port", str(second_port))
        assert second.returncode != 0
        line = _one_line_error(second)
        assert str(tmp_path / "state" / "ledger.sqlite3") in line and f"pid {first.pid}" in line
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        with _serving(first_config, tmp_path / "third.log") as third:
            _ready(first_port, third, tmp_path / "third.log")


def test_bad_demo_options_name_the_option_and_the_file() -> None:
    missing = _cli("demo", "--recording", "missing.jsonl")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "'--recording'" in missing.stderr and "no such file: missing.jsonl" in missing.stderr
    for option in ("--throttle-ms", "--pace-ms"):
        negative = _cli("demo", option, "-5")
        assert negative.returncode == 2, negative.stderr
        assert f"'{option}'" in negative.stderr and "greater than or equal to 0" in negative.stderr


COMMANDS = [
    ["serve"],
    ["demo"],
    ["replay"],
    ["case"],
    ["mock"],
    ["chaos"],
    ["runs"],
    ["runs", "retry"],
    ["runs", "drop"],
    ["runs", "erase"],
    ["erase"],
    ["audit"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_help_reads_without_markup_accidents(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "120", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    text = result.output
    assert "<bool>" not in text and "--help <" not in text and "override .host" not in text and "[/" not in text
    options = [line for line in text.splitlines() if line.strip().startswith("--")]
    assert not [line for line in options if re.search(r"--[\w-]+ <(str|int|float|path)", line)], text  # metavars
    if command == ["serve"]:
        assert "[service].host" in text and "[service].port" in text
    if command == ["replay"]:
        assert "STREAMRELAY_URL" in text and "--wait-s SECONDS" in text
