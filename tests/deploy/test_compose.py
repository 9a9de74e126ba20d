"""deploy/compose.yaml, checked without Docker: it parses, every service's command is one the CLI accepts, what it
references exists, and the dry run it describes works with the same commands and environment as processes here:
two mocks, two sidecars, and the example bot streaming a recorded answer into both (service names become loopback
ports; nothing else changes)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.deploy.support import DEPLOY, ROOT, Process, cli_accepts, free_port, started

pytestmark = pytest.mark.timeout(180)

COMPOSE = DEPLOY / "compose.yaml"
STREAMRELAY = ("mock-telegram", "mock-slack", "sidecar-a", "sidecar-b", "bot")


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict)
    return loaded


def services() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose()["services"]
    return found


def interpolate(value: str) -> str:
    """Compose's ``${VAR:-default}`` with nothing set: the default."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def test_it_has_a_bot_two_sidecars_redis_and_the_mocks_each_built_from_the_dockerfile() -> None:
    found = services()
    assert set(found) == {*STREAMRELAY, "redis"}
    for name in STREAMRELAY:
        build = found[name]["build"]
        context = (COMPOSE.parent / build["context"]).resolve()
        assert context == ROOT and (context / build["dockerfile"]) == DEPLOY / "Dockerfile", name
    assert found["redis"]["image"].startswith("redis:")
    for name, service in found.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in found, f"{name} depends on unknown {dependency}"
        for volume in service.get("volumes", []):
            assert volume.split(":")[0] in compose()["volumes"], f"{name}: volume {volume} is not declared"


def test_every_command_is_one_the_cli_accepts_and_every_sidecar_has_its_own_volume() -> None:
    found = services()
    for name in ("mock-telegram", "mock-slack", "sidecar-a", "sidecar-b"):
        cli_accepts(found[name]["command"])
    bot = found["bot"]
    assert bot["entrypoint"][0] == "python" and (ROOT / bot["entrypoint"][1]).is_file()
    assert (ROOT / bot["environment"]["BOT_RECORDING"]).is_file()
    volumes = [found[name]["volumes"] for name in ("sidecar-a", "sidecar-b")]
    assert all(v[0].endswith(":/var/lib/streamrelay") for v in volumes) and volumes[0] != volumes[1]
    assert found["sidecar-a"]["healthcheck"]["test"] == ["CMD", "python", "deploy/healthcheck.py"]


class DryRun:
    """The compose services as local processes: ``http://SERVICE:PORT`` becomes ``http://127.0.0.1:LOCAL``."""

    def __init__(self, tmp: Path, stack: ExitStack) -> None:
        self.tmp, self.stack = tmp, stack
        self.ports = {name: free_port() for name in STREAMRELAY}
        self.processes: dict[str, Process] = {}

    def local(self, value: str) -> str:
        for name, port in self.ports.items():
            value = re.sub(rf"http://{re.escape(name)}:\d+", f"http://127.0.0.1:{port}", value)
        return interpolate(value)

    def start(self, name: str) -> Process:
        service = services()[name]
        env = {key: self.local(str(value)) for key, value in service.get("environment", {}).items()}
        command = [str(part) for part in service.get("command", [])]
        if name.startswith("mock-"):
            command = [*command[:-4], "--host", "127.0.0.1", "--port", str(self.ports[name])]  # --host, --port last
            argv = ["uv", "run", "--frozen", "streamrelay", *command]
        elif name == "bot":
            argv = ["uv", "run", "--frozen", *service["entrypoint"]]
        else:
            argv = ["uv", "run", "--frozen", "streamrelay", *command]
            env |= {
                "STREAMRELAY_SERVICE__HOST": "127.0.0.1",  # the image's ENV, with loopback for 0.0.0.0
                "STREAMRELAY_SERVICE__PORT": str(self.ports[name]),
                "STREAMRELAY_SERVICE__LEDGER": str(self.tmp / name / "streamrelay.sqlite3"),
                "STREAMRELAY_SERVICE__LOG_FORMAT": "json",
            }
        process = self.stack.enter_context(started(argv, env, self.tmp / f"{name}.log"))
        self.processes[name] = process
        return process

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"


@pytest.fixture
def dry_run(tmp_path: Path) -> Iterator[DryRun]:
    with ExitStack() as stack:
        yield DryRun(tmp_path, stack)


def test_the_dry_run_delivers_the_bots_runs_through_both_sidecars(dry_run: DryRun) -> None:
    for mock in ("mock-telegram", "mock-slack"):
        dry_run.start(mock)
    for mock in ("mock-telegram", "mock-slack"):
        dry_run.processes[mock].wait_http(f"{dry_run.url(mock)}/_mock/state")  # its healthcheck's URL
    for sidecar in ("sidecar-a", "sidecar-b"):
        dry_run.start(sidecar)
    bot = dry_run.start("bot")  # it waits for both sidecars' /readyz itself
    assert bot.popen.wait(150) == 0, bot.output()
    lines = bot.output().splitlines()
    assert any(" telegram 1001: delivered in " in line for line in lines), lines
    assert any(" slack C0DRYRUN01: delivered in " in line for line in lines), lines

    telegram = httpx.get(f"{dry_run.url('mock-telegram')}/_mock/state", timeout=10).json()
    shown = "\n".join(message["text"] for message in telegram["chats"]["1001"])
    assert "Algorithms & Data Structures Summary" in shown
    assert not [call for call in telegram["calls"] if call.get("status") == 429]  # documented limits kept
    slack = httpx.get(f"{dry_run.url('mock-slack')}/_mock/state", timeout=10).json()
    assert slack["chats"]["C0DRYRUN01"]

    token = interpolate(services()["sidecar-a"]["environment"]["STREAMRELAY_METRICS_TOKEN"])
    metrics = httpx.get(f"{dry_run.url('sidecar-a')}/metrics", headers={"Authorization": f"Bearer {token}"})
    assert metrics.status_code == 200 and 'streamrelay_runs_ended_total{channel="telegram",status="ok"} 1.0' in (
        metrics.text
    )
    for sidecar in ("sidecar-a", "sidecar-b"):
        process = dry_run.processes[sidecar]
        assert process.stop() == 0
        assert "DRY-run-token" not in process.output() and "DRYrunTOKEN" not in process.output()
