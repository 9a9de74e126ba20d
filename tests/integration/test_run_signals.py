"""``streamrelay run -- <bot>``'s signals and exit codes, with real processes (breaker findings 4 and 7): a signal
to ``run`` reaches the bot's whole process group (``sh -c 'sleep 777; ...'`` leaves no ``sleep`` behind), a bot that
ignores it is killed after the grace period or at a second signal, a sidecar that stops under the bot ends it the
same way, a signal before ``/readyz`` exits 128 + N, a command that does not exist exits 127.

Where a test needs a short grace period or a sidecar that never gets ready (or stops by itself), ``run`` starts
through a small launcher that sets those on the module before the CLI runs (``GRACE_S``, ``_until_ready``,
``serve``); everything else is the real command. No timing asserts: only generous timeouts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from tests.contention import wait_scale
from tests.ports import free_port

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60.0  # a hang guard for an idle machine: each use stretches it by the load as it starts (wait_scale)


def config(tmp: Path) -> Path:
    path = tmp / "channels.toml"
    path.write_text(
        f'[service]\nport = {free_port()}\nledger = "{tmp / "ledger.sqlite3"}"\nactions = ""\nlog_format = "json"\n'
    )
    return path


LAUNCHER = """
import asyncio, sys
from pathlib import Path
import streamrelay.app.run_bot as run_bot

run_bot.GRACE_S = float(sys.argv[1])
mode, marker = sys.argv[2], Path(sys.argv[3])

async def never_ready(url, serving, stop):
    marker.write_text("waiting")
    await stop.asked.wait()
    return False

async def ready(url, serving, stop):
    return True

async def stops_soon(config, *, signals, **kwargs):
    while not marker.exists():
        await asyncio.sleep(0.05)

if mode == "never-ready":
    run_bot._until_ready = never_ready
elif mode == "sidecar-stops":
    run_bot._until_ready = ready
    run_bot.serve = stops_soon

from streamrelay.app.cli import app
app(sys.argv[4:], prog_name="streamrelay")
"""


def launched(grace_s: float, mode: str, marker: Path, args: list[str]) -> list[str]:
    return [sys.executable, "-c", LAUNCHER, str(grace_s), mode, str(marker), *args]


@contextmanager
def process(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def until_file(path: Path, proc: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + TIMEOUT_S * wait_scale()
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        assert proc.poll() is None, f"run exited {proc.returncode} early:\n{log.read_text()[-4000:]}"
        time.sleep(0.05)
    raise AssertionError(f"{path} never written:\n{log.read_text()[-4000:]}")


def members(pgid: int) -> list[str]:
    """The command lines of the processes in group ``pgid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace").strip())
    return found


def until_sleeping(pgid: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Wait until the bot's ``sleep 777`` runs (a signal between sh's ``echo`` and its fork would reach sh alone,
    which dash holds until its next command ends: the grace period's case, not this one's)."""
    deadline = time.monotonic() + TIMEOUT_S * wait_scale()
    while time.monotonic() < deadline:
        if "sleep 777" in members(pgid):
            return
        assert proc.poll() is None, f"run exited {proc.returncode} early:\n{log.read_text()[-4000:]}"
        time.sleep(0.05)
    raise AssertionError(f"the bot's sleep never started: {members(pgid)}")


def group_gone(pgid: int) -> bool:
    """True once no process of the group ``pgid`` is left (waits up to the generous timeout)."""
    deadline = time.monotonic() + TIMEOUT_S * wait_scale()
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@contextmanager
def reaped(pgid_file: Path) -> Iterator[None]:
    """Kill what the test's bot left (its group) whatever the test's result."""
    try:
        yield
    finally:
        if pgid_file.exists() and pgid_file.read_text().strip():
            with suppress(ProcessLookupError, ValueError):
                os.killpg(int(pgid_file.read_text()), signal.SIGKILL)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_to_run_reaches_the_whole_bot_group_and_leaves_no_sleep(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    pid_file, log = tmp_path / "bot.pid", tmp_path / "run.log"
    bot = f"echo $$ > {pid_file}; sleep 777; echo after"
    argv = [sys.executable, "-m", "streamrelay", "run", "--config", str(config(tmp_path)), "--", "sh", "-c", bot]
    with reaped(pid_file), process(argv, log) as run:
        pgid = int(until_file(pid_file, run, log))
        until_sleeping(pgid, run, log)
        run.send_signal(sig)
        assert run.wait(TIMEOUT_S * wait_scale()) == code, log.read_text()[-4000:]
        assert group_gone(pgid), f"processes of the bot's group outlived run: {members(pgid)}"
    assert "after" not in log.read_text().splitlines()
    assert f"journal and ledger: {tmp_path / 'ledger.sqlite3'}" in log.read_text()  # the path, logged at start


def test_a_bot_ignoring_signals_is_killed_at_the_second_signal(tmp_path: Path) -> None:
    pid_file, log = tmp_path / "bot.pid", tmp_path / "run.log"
    bot = f"trap '' INT TERM; echo $$ > {pid_file}; sleep 777"
    args = ["run", "--config", str(config(tmp_path)), "--", "sh", "-c", bot]
    with reaped(pid_file), process(launched(600, "real", tmp_path / "unused", args), log) as run:
        pgid = int(until_file(pid_file, run, log))
        until_sleeping(pgid, run, log)
        run.send_signal(signal.SIGTERM)
        time.sleep(1)  # not an assert: the two signals handled one after the other
        assert run.poll() is None, "the bot ignores SIGTERM: run waits for it"
        run.send_signal(signal.SIGTERM)
        assert run.wait(TIMEOUT_S * wait_scale()) == 128 + signal.SIGKILL, log.read_text()[-4000:]
        assert group_gone(pgid)


def test_a_bot_ignoring_signals_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    pid_file, log = tmp_path / "bot.pid", tmp_path / "run.log"
    bot = f"trap '' INT TERM; echo $$ > {pid_file}; sleep 777"
    args = ["run", "--config", str(config(tmp_path)), "--", "sh", "-c", bot]
    with reaped(pid_file), process(launched(1, "real", tmp_path / "unused", args), log) as run:
        pgid = int(until_file(pid_file, run, log))
        until_sleeping(pgid, run, log)
        run.send_signal(signal.SIGINT)
        assert run.wait(TIMEOUT_S * wait_scale()) == 128 + signal.SIGKILL, log.read_text()[-4000:]
        assert group_gone(pgid)


def test_a_sidecar_stopping_under_the_bot_ends_its_group_and_exits_1(tmp_path: Path) -> None:
    pid_file, log, stop_marker = tmp_path / "bot.pid", tmp_path / "run.log", tmp_path / "stop-sidecar"
    bot = f"trap '' TERM; echo $$ > {pid_file}; sleep 777"
    args = ["run", "--config", str(config(tmp_path)), "--", "sh", "-c", bot]
    with reaped(pid_file), process(launched(1, "sidecar-stops", stop_marker, args), log) as run:
        pgid = int(until_file(pid_file, run, log))
        until_sleeping(pgid, run, log)
        stop_marker.write_text("stop")
        assert run.wait(TIMEOUT_S * wait_scale()) == 1, log.read_text()[-4000:]
        assert group_gone(pgid)
    assert "the sidecar stopped before the bot" in log.read_text()


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_before_readyz_exits_128_plus_its_number_and_never_starts_the_bot(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    waiting, started, log = tmp_path / "waiting", tmp_path / "bot-started", tmp_path / "run.log"
    bot = [sys.executable, "-c", f"open({str(started)!r}, 'w')"]
    args = ["run", "--config", str(config(tmp_path)), "--", *bot]
    with process(launched(600, "never-ready", waiting, args), log) as run:
        until_file(waiting, run, log)
        run.send_signal(sig)
        assert run.wait(TIMEOUT_S * wait_scale()) == code, log.read_text()[-4000:]
    assert not started.exists()


def test_a_command_that_does_not_exist_exits_127_with_one_line(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-bot")
    done = subprocess.run(
        [sys.executable, "-m", "streamrelay", "run", "--config", str(config(tmp_path)), "--", missing],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120 * wait_scale(),
    )
    assert done.returncode == 127, done.stderr
    assert f"cannot start {missing!r}" in done.stderr and "Traceback" not in done.stderr, done.stderr
