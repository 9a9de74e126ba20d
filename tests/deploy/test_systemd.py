"""deploy/systemd/streamrelay.service, checked here: systemd's own verifier accepts it (where systemd-analyze
exists), its ExecStart names the real command with options the CLI accepts, the state directory holds the ledger,
the stop timeout covers the drain, the hardening is there, and the command runs as written and stops on SIGTERM."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from streamrelay.app.service import SHUTDOWN_GRACE_S
from streamrelay.config.settings import ServiceSettings
from tests.deploy.support import DEPLOY, ROOT, cli_accepts, free_port, read_unit, started

pytestmark = pytest.mark.timeout(120)

UNIT = DEPLOY / "systemd" / "streamrelay.service"
INSTALLED = "/opt/streamrelay"
"""Where the unit expects the checkout (its comment says how to put it there)."""

HARDENING = {
    "NoNewPrivileges": "yes",
    "DynamicUser": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "CapabilityBoundingSet": "",
    "RestrictSUIDSGID": "yes",
    "SystemCallArchitectures": "native",
    "UMask": "0077",
}


def service() -> dict[str, list[str]]:
    return read_unit(UNIT)["Service"]


def exec_start() -> list[str]:
    (line,) = service()["ExecStart"]
    return shlex.split(line)


def test_execstart_is_the_environments_streamrelay_with_options_the_cli_accepts() -> None:
    argv = exec_start()
    assert argv[0] == f"{INSTALLED}/.venv/bin/streamrelay"  # what `uv sync --frozen --no-dev` puts there
    assert (ROOT / ".venv" / "bin" / "streamrelay").is_file()
    cli_accepts(argv[1:])
    assert argv[1] == "serve" and service()["WorkingDirectory"] == [INSTALLED]


def test_the_ledger_is_in_the_state_directory_and_the_stop_timeout_covers_the_drain() -> None:
    unit = service()
    assert unit["StateDirectory"] == ["streamrelay"]
    env = dict(value.split("=", 1) for value in unit["Environment"])
    assert Path(env["STREAMRELAY_SERVICE__LEDGER"]).parent == Path("/var/lib/streamrelay")
    assert unit["KillSignal"] == ["SIGTERM"]
    assert int(unit["TimeoutStopSec"][0]) >= ServiceSettings().drain_s + SHUTDOWN_GRACE_S + 5
    assert unit["EnvironmentFile"] == ["/etc/streamrelay/streamrelay.env"]  # tokens: never in the unit


def test_the_hardening_options_are_set() -> None:
    unit = service()
    for key, value in HARDENING.items():
        assert unit.get(key) == [value], key
    assert read_unit(UNIT)["Install"]["WantedBy"] == ["multi-user.target"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_verifies_the_unit_without_a_warning(tmp_path: Path) -> None:
    unit = tmp_path / "streamrelay.service"
    unit.write_text(UNIT.read_text().replace(INSTALLED, str(ROOT)))  # installed here: this checkout
    done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stdout + done.stderr


def test_the_command_runs_as_written_and_stops_on_sigterm(tmp_path: Path) -> None:
    argv = [part.replace(INSTALLED, str(ROOT)) for part in exec_start()]
    argv[argv.index("--config") + 1] = str(
        ROOT / "streamrelay" / "config" / "channels.toml"
    )  # what the install copies there
    env = dict(value.split("=", 1) for value in service()["Environment"])
    port = free_port()
    env |= {
        "STREAMRELAY_SERVICE__LEDGER": str(tmp_path / "state" / "streamrelay.sqlite3"),
        "STREAMRELAY_SERVICE__PORT": str(port),
        "STREAMRELAY_TOKEN": "systemd-test-ingest-token",  # from EnvironmentFile in the real unit
        "TELEGRAM_BOT_TOKEN": "123456:DRY-run-token-for-the-mock-bot-api",
    }
    with started(argv, env, tmp_path / "journal.log", cwd=ROOT) as process:
        process.wait_http(f"http://127.0.0.1:{port}/readyz")
        assert process.stop(timeout_s=float(service()["TimeoutStopSec"][0])) == 0
    assert (tmp_path / "state" / "streamrelay.sqlite3").is_file()
    assert '"event": "stopped"' in process.output()  # --log-format json, as journald gets it
