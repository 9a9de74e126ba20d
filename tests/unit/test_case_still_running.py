"""``streamrelay case`` names a case that runs long where no progress bar shows it (a CI log): without it the log
said nothing for the first scenario's minute (its platform SDK's import, at load ~5 on 2 cores)."""

from __future__ import annotations

import io
import time

from rich.console import Console

from streamrelay.app.cli import StillRunning


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=False, width=120), out


def test_a_long_case_is_named_while_it_runs_and_a_quick_one_is_not() -> None:
    console, out = _console()
    with StillRunning(console, every_s=0.2) as still:
        still.running("quick-case")
        still.running(None)
        still.running("slow-case")
        deadline = time.monotonic() + 30  # a hang guard: the first word comes after 0.2 s on an idle machine
        while "still running" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)
        still.running(None)
    lines = out.getvalue().splitlines()
    assert lines, "no word on a case running past every_s"
    assert all(line.startswith("  slow-case still running (") and line.endswith(" s)") for line in lines), lines


def test_nothing_is_said_between_cases_nor_on_a_terminal() -> None:
    console, out = _console()
    with StillRunning(console, every_s=0.05):
        time.sleep(0.3)  # no case named: nothing to say
    assert out.getvalue() == ""
    terminal = io.StringIO()
    with StillRunning(Console(file=terminal, force_terminal=True), every_s=0.05) as still:
        still.running("slow-case")
        time.sleep(0.3)  # a terminal shows the bar's elapsed time instead
    assert terminal.getvalue() == ""
