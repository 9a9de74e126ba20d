"""Fuzzing the ingest contract (what every fuzz module checks, and how they share the work: tests/fuzz/__init__.py):
valid runs, taken whole, and bodies whose lines name their runs.
"""

from __future__ import annotations

import httpx
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.checks import check_counted, close_and_read, fresh_run, post, run_path
from tests.fuzz.conftest import FUZZ_MARKS, FuzzStack, fuzz_settings
from tests.fuzz.strategies import body, multi_run_bodies, valid_run_lines, with_runs
from tests.fuzz.victim import Victim, check_unharmed

pytestmark = FUZZ_MARKS


@fuzz_settings(max_examples=150)
@given(lines=valid_run_lines(), crlf=st.booleans())
def test_a_valid_run_is_taken_whole(http: httpx.Client, victim: Victim, lines: list[bytes], crlf: bool) -> None:
    run = fresh_run("v")
    data = with_runs(body(lines, crlf=crlf), run)
    answer = post(http, run_path(run, "/events"), data)
    assert answer["status"] == 200, answer
    check_counted(answer, data)
    close_and_read(http, run)


@fuzz_settings(max_examples=200)
@given(template=multi_run_bodies())
def test_lines_naming_their_runs_get_a_2xx_or_a_4xx_naming_the_problem(
    http: httpx.Client, victim: Victim, template: bytes
) -> None:
    run, other = fresh_run("m"), fresh_run("m")
    data = with_runs(template, run, other)
    answer = post(http, "/v1/events", data)
    check_counted(answer, data)
    close_and_read(http, run, other)


def test_the_victim_run_was_not_affected(fuzz_stack: FuzzStack, victim: Victim) -> None:
    """Last in the module: the run that streamed beside the fuzzing shows its whole text, once."""
    check_unharmed(fuzz_stack, victim)
