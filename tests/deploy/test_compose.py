"""deploy/compose.yaml, checked without Docker: it parses, every service's command is one the CLI accepts, what it
references exists, and the dry run it describes works with the same commands and environment as processes here:
redis, two mocks, two sidecar replicas on that redis, and the example bot streaming a recorded answer into each
replica and reading each report through the other one (service names become loopback ports; nothing else changes).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml

from streamrelay.adapters.redis import Leases, ReplicaUrls, RunIndex, connect
from streamrelay.config.settings import ServiceSettings
from tests.deploy.support import DEPLOY, ROOT, Process, cli_accepts, started, started_redis
from tests.ports import free_port

pytestmark = pytest.mark.timeout(180)

COMPOSE = DEPLOY / "compose.yaml"
STREAMRELAY = ("mock-telegram", "mock-slack", "sidecar-a", "sidecar-b", "bot")
SIDECARS = ("sidecar-a", "sidecar-b")
SIDECAR_PORT = 8787
"""The port the image's sidecar listens on inside its container (the Dockerfile's EXPOSE)."""


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


def test_every_command_is_one_the_cli_accepts() -> None:
    found = services()
    for name in ("mock-telegram", "mock-slack", *SIDECARS):
        cli_accepts(found[name]["command"])
    bot = found["bot"]
    assert bot["entrypoint"][0] == "python" and (ROOT / bot["entrypoint"][1]).is_file()
    assert (ROOT / bot["environment"]["BOT_RECORDING"]).is_file()
    assert found["sidecar-a"]["healthcheck"]["test"] == ["CMD", "python", "deploy/healthcheck.py"]


def test_the_sidecars_are_replicas_on_the_compose_redis_each_announcing_its_own_address() -> None:
    found = services()
    fields = set(ServiceSettings.model_fields)
    for name in SIDECARS:
        sidecar = found[name]
        env = sidecar["environment"]
        for key in env:
            if key.startswith("STREAMRELAY_SERVICE__"):
                assert key.removeprefix("STREAMRELAY_SERVICE__").lower() in fields, f"{name}: {key} is no setting"
        assert env["STREAMRELAY_SERVICE__BACKEND"] == "redis"
        redis_url = urlsplit(env["STREAMRELAY_SERVICE__REDIS_URL"])
        assert redis_url.scheme == "redis" and redis_url.hostname == "redis" and redis_url.port == 6379
        assert "--port" not in found["redis"]["command"]  # so redis listens on 6379, its default
        assert env["STREAMRELAY_SERVICE__ADVERTISE_URL"] == f"http://{name}:{SIDECAR_PORT}"  # not 0.0.0.0
        assert any(port.endswith(f":{SIDECAR_PORT}") for port in sidecar["ports"])
        assert sidecar["depends_on"]["redis"]["condition"] == "service_healthy"
        assert "volumes" not in sidecar  # no SQLite file: the journal and the ledger are redis's
    assert set(compose()["volumes"]) == {"redis-data"}
    redis_command = found["redis"]["command"]
    assert redis_command[redis_command.index("--appendonly") + 1] == "yes"  # accepted lines survive a restart
    specs = [spec.split(",") for spec in found["bot"]["environment"]["BOT_TARGETS"].split()]
    posted_to = [urlsplit(spec[0]).hostname for spec in specs]
    read_through = [urlsplit(spec[3]).hostname for spec in specs]
    assert sorted(posted_to) == list(SIDECARS)  # a run into each replica
    assert all(read != posted for read, posted in zip(read_through, posted_to, strict=True))  # read via the other


class DryRun:
    """The compose services as local processes: ``SCHEME://SERVICE:PORT`` becomes ``SCHEME://127.0.0.1:LOCAL``."""

    def __init__(self, tmp: Path, stack: ExitStack) -> None:
        self.tmp, self.stack = tmp, stack
        self.ports = {name: free_port() for name in (*STREAMRELAY, "redis")}
        self.processes: dict[str, Process] = {}

    def local(self, value: str) -> str:
        for name, port in self.ports.items():
            value = re.sub(rf"\b([a-z][a-z0-9+.-]*)://{re.escape(name)}:\d+", rf"\g<1>://127.0.0.1:{port}", value)
        return interpolate(value)

    def start_redis(self) -> Process:
        """The compose's redis: a local redis-server, nothing kept (the dry run needs no durability)."""
        process = self.stack.enter_context(started_redis(self.ports["redis"], self.tmp / "redis"))
        self.processes["redis"] = process
        return process

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

    def redis_url(self) -> str:
        return self.local(services()["sidecar-a"]["environment"]["STREAMRELAY_SERVICE__REDIS_URL"])


@pytest.fixture
def dry_run(tmp_path: Path) -> Iterator[DryRun]:
    with ExitStack() as stack:
        yield DryRun(tmp_path, stack)


async def owner_url(redis_url: str, run: str) -> str:
    """The advertised URL of the replica that owns ``run``'s partition now (as the owner proxy finds it)."""
    client = connect(redis_url)
    try:
        partition = await RunIndex(client).partition(run)
        assert partition is not None, f"{run} is in no partition"
        for _ in range(200):  # a hand-over between the two replicas may be under way
            holder = await Leases(client).holder(partition)
            if holder is not None and (url := await ReplicaUrls(client).url(holder.owner)) is not None:
                return url
            await asyncio.sleep(0.05)
        raise AssertionError(f"partition {partition} of {run} has no owner")
    finally:
        await client.aclose()


def runs_ended(metrics: str, channel: str) -> float:
    pattern = rf'^streamrelay_runs_ended_total\{{channel="{channel}",end="ok",status="delivered"\}} (\S+)$'
    return sum(float(value) for value in re.findall(pattern, metrics, flags=re.MULTILINE))


def test_the_dry_run_delivers_a_run_through_each_replica_and_reads_each_report_through_the_other(
    dry_run: DryRun,
) -> None:
    dry_run.start_redis()  # skips without redis-server (fails with STREAMRELAY_REQUIRE_REDIS=1)
    for mock in ("mock-telegram", "mock-slack"):
        dry_run.start(mock)
    for mock in ("mock-telegram", "mock-slack"):
        dry_run.processes[mock].wait_http(f"{dry_run.url(mock)}/_mock/state")  # its healthcheck's URL
    for sidecar in SIDECARS:
        dry_run.start(sidecar)
    bot = dry_run.start("bot")  # it waits for both sidecars' /readyz itself
    assert bot.popen.wait(150) == 0, bot.output()
    a, b = dry_run.url("sidecar-a"), dry_run.url("sidecar-b")
    runs: dict[str, str] = {}
    for posted, chat, read in ((a, "telegram 1001", b), (b, "slack C0DRYRUN01", a)):
        line = re.search(
            rf"^{re.escape(posted)} {chat}: delivered in \d+ messages \((bot-[0-9a-f]+), report read through "
            rf"{re.escape(read)}\)$",
            bot.output(),
            flags=re.MULTILINE,
        )
        assert line is not None, f"no {chat} run posted to {posted} and read through {read}: {bot.output()}"
        runs[line[1]] = chat

    telegram = httpx.get(f"{dry_run.url('mock-telegram')}/_mock/state", timeout=10).json()
    shown = "\n".join(message["text"] for message in telegram["chats"]["1001"])
    assert "Algorithms & Data Structures Summary" in shown
    assert not [call for call in telegram["calls"] if call.get("status") == 429]  # documented limits kept
    slack = httpx.get(f"{dry_run.url('mock-slack')}/_mock/state", timeout=10).json()
    assert slack["chats"]["C0DRYRUN01"]

    # Whichever replica owns a run's partition, the other one forwards: each report reads the same through both.
    token = interpolate(services()["bot"]["environment"]["STREAMRELAY_TOKEN"])
    for run in runs:
        owner = asyncio.run(owner_url(dry_run.redis_url(), run))
        assert owner in (a, b), owner  # the advertised URL, as the compose maps it
        other = b if owner == a else a
        reports = [
            httpx.get(f"{url}/v1/runs/{run}", headers={"Authorization": f"Bearer {token}"}, timeout=30)
            for url in (owner, other)
        ]
        assert [r.status_code for r in reports] == [200, 200], [r.text for r in reports]
        assert reports[1].json() == reports[0].json() and reports[0].json()["status"] == "delivered", runs[run]

    metrics_token = interpolate(services()["sidecar-a"]["environment"]["STREAMRELAY_METRICS_TOKEN"])
    ended = {"telegram": 0.0, "slack": 0.0}
    for sidecar in SIDECARS:
        metrics = httpx.get(
            f"{dry_run.url(sidecar)}/metrics", headers={"Authorization": f"Bearer {metrics_token}"}, timeout=10
        )
        assert metrics.status_code == 200, metrics.text
        for channel in ended:
            ended[channel] += runs_ended(metrics.text, channel)
    assert ended == {"telegram": 1.0, "slack": 1.0}  # each run ran once, on its owner
    for sidecar in SIDECARS:
        process = dry_run.processes[sidecar]
        assert process.stop() == 0
        assert "DRY-run-token" not in process.output() and "DRYrunTOKEN" not in process.output()
