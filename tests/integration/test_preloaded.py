"""Commands forked from a zygote that has imported them (:mod:`app.preloaded`): the request's arguments,
directory and log reach the command (its environment: the
serve tests that start it so, whose tokens come from it); exit codes and kills are reported as Popen reports them; an
environment that disagrees with the zygote's on what modules read at import is refused."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamrelay.app.preloaded import IMPORT_TIME_ENV, Forked, Preloaded, config_modules
from tests.contention import wait_scale
from tests.ports import free_port


@pytest.fixture(scope="module")
def zygote() -> Iterator[Preloaded]:
    preloaded = Preloaded(os.environ)
    yield preloaded
    preloaded.close()


def test_a_command_runs_with_the_requests_arguments_and_log(zygote: Preloaded, tmp_path: Path) -> None:
    log = tmp_path / "version.log"
    forked = zygote.start(["--version"], os.environ, log, tmp_path)
    assert forked.wait(30 * wait_scale()) == 0
    assert log.read_text().startswith("streamrelay ")
    assert forked.pid != zygote.pid


def test_a_usage_error_exits_2_and_says_so_in_the_log(zygote: Preloaded, tmp_path: Path) -> None:
    log = tmp_path / "bad.log"
    forked = zygote.start(["no-such-command"], os.environ, log)
    assert forked.wait(30 * wait_scale()) == 2
    assert "no-such-command" in log.read_text()


def test_a_kill_is_reported_as_popen_does(zygote: Preloaded, tmp_path: Path) -> None:
    log = tmp_path / "mock.log"
    port = free_port()
    forked = zygote.start(["mock", "slack", "--port", str(port)], {**os.environ, "NO_COLOR": "1"}, log, tmp_path)
    try:
        _killed_as_popen_reports(forked, log, tmp_path)
    finally:  # a failed check leaves no mock running
        if forked.poll() is None:
            os.kill(forked.pid, signal.SIGKILL)


def _killed_as_popen_reports(forked: Forked, log: Path, tmp_path: Path) -> None:
    deadline = time.monotonic() + 30 * wait_scale()
    while not log.exists() or "mock Slack Web API" not in log.read_text():  # the command's output, in the log
        assert time.monotonic() < deadline and forked.poll() is None, f"exit {forked.poll()}"
        time.sleep(0.02)
    assert Path(f"/proc/{forked.pid}/cwd").resolve() == tmp_path.resolve()
    assert os.getsid(forked.pid) == forked.pid  # a session of its own
    with pytest.raises(subprocess.TimeoutExpired):
        forked.wait(0.1)
    forked.send_signal(signal.SIGKILL)
    assert forked.wait(10 * wait_scale()) == -signal.SIGKILL
    assert forked.poll() == -signal.SIGKILL


def test_an_environment_other_than_the_zygotes_at_import_is_refused(zygote: Preloaded, tmp_path: Path) -> None:
    name = IMPORT_TIME_ENV[0]
    other = {**os.environ, name: "0" if os.environ.get(name) == "1" else "1"}
    with pytest.raises(ValueError, match=name):
        zygote.start(["--version"], other, tmp_path / "x.log")


def test_serve_imports_the_sdks_of_its_configs_platforms(tmp_path: Path) -> None:
    config = tmp_path / "channels.toml"
    config.write_text('[channels.a]\nplatform = "telegram"\n\n[channels.b]\nplatform = "web"\n')
    assert config_modules(["serve", "--config", str(config)]) == ["streamrelay.adapters.telegram.adapter"]
    assert config_modules(["serve", "--config", str(tmp_path / "missing.toml")]) == []
    assert config_modules(["demo"]) == []
