"""deploy/systemd/streamrelay.service, checked here: systemd's own verifier accepts it (where systemd-analyze
exists), its ExecStart names the real command with options the CLI accepts, the state directory holds the ledger,
the stop timeout covers the drain, the hardening is there, and the command runs as written and stops on SIGTERM."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from streamrelay.app.service import SHUTDOWN_GRACE_S
from streamrelay.config.settings import ServiceSettings
from tests.deploy.support import DEPLOY, ROOT, cli_accepts, read_unit, started
from tests.ports import free_port

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


HIDDEN = ("/home/", "/root/", "/run/user/")
"""What ProtectHome=yes hides from the service."""


def install_lines() -> list[str]:
    """The install commands of the unit's comment."""
    return [line.lstrip("# ").strip() for line in UNIT.read_text().splitlines() if line.startswith("#   sudo")]


def test_the_documented_install_puts_a_uv_managed_python_under_opt_never_under_a_home() -> None:
    (sync,) = [line for line in install_lines() if " uv sync " in line]
    words = shlex.split(sync)
    env = dict(word.split("=", 1) for word in words if "=" in word and not word.startswith("-"))
    assert env["UV_PYTHON_INSTALL_DIR"].startswith(f"{INSTALLED}/") or env["UV_PYTHON_INSTALL_DIR"].startswith(
        "/var/lib/"
    )
    assert {"--frozen", "--no-dev", "--managed-python"} <= set(words)
    assert any(line.startswith(f"sudo git clone <this repository> {INSTALLED}") for line in install_lines())


def check_venv(venv: Path) -> subprocess.CompletedProcess[str]:
    (pre,) = service()["ExecStartPre"]
    assert pre.startswith("+")  # outside the sandbox: it must see where the link leads
    argv = [part.replace(INSTALLED, str(ROOT)) for part in shlex.split(pre[1:])]
    assert argv[-1] == str(ROOT / ".venv") and (ROOT / "deploy" / "systemd" / "check-venv.sh").is_file()
    return subprocess.run([*argv[:-1], str(venv)], capture_output=True, text=True, timeout=30)


def venv_with(tmp: Path, python: Path) -> Path:
    venv = tmp / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(python)
    return venv


def test_the_start_check_refuses_a_venv_whose_python_protecthome_hides_and_says_how_to_fix_it(tmp_path: Path) -> None:
    python = Path(sys.executable).resolve()  # this machine's: pyenv's under /root here, /usr/bin in CI's image
    done = check_venv(venv_with(tmp_path, python))
    if str(python).startswith(HIDDEN):
        assert done.returncode == 1 and "ProtectHome=yes" in done.stderr and "UV_PYTHON_INSTALL_DIR=" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
    missing = check_venv(tmp_path / "nowhere")
    assert missing.returncode == 1 and "no Python in" in missing.stderr


def test_the_start_check_accepts_a_python_outside_the_homes(tmp_path: Path) -> None:
    installed = tmp_path / "opt" / "python" / "bin" / "python3"  # as UV_PYTHON_INSTALL_DIR=/opt/... places it
    installed.parent.mkdir(parents=True)
    installed.write_text("#!/bin/sh\n")
    installed.chmod(0o755)
    done = check_venv(venv_with(tmp_path, installed))
    assert done.returncode == 0 and done.stderr == ""
