"""Fuzzing the ingest contract (what every fuzz module checks, and how they share the work: tests/fuzz/__init__.py):
valid, broken and hostile NDJSON bodies of one run, and the fixed samples of bad run starts.
"""

from __future__ import annotations

import reprlib

import httpx
import pytest
from hypothesis import given

from tests.fuzz.checks import check_counted, close_and_read, fresh_run, post, run_path
from tests.fuzz.conftest import FUZZ_MARKS, FuzzStack, fuzz_settings
from tests.fuzz.samples import BAD_OVERRIDES, BAD_TARGETS, ODD_TARGETS
from tests.fuzz.strategies import body, encode, run_bodies, with_runs
from tests.fuzz.victim import Victim, check_unharmed

pytestmark = FUZZ_MARKS


@fuzz_settings(max_examples=300)
@given(template=run_bodies())
def test_a_run_body_gets_a_2xx_or_a_4xx_naming_the_problem(http: httpx.Client, victim: Victim, template: bytes) -> None:
    run = fresh_run("r")
    data = with_runs(template, run)
    answer = post(http, run_path(run, "/events"), data)
    check_counted(answer, data)
    close_and_read(http, run)


REFUSED_STARTS = [
    *({"channel": channel, "target": target} for channel in ("telegram", "web") for target in BAD_TARGETS),
    *({"channel": "telegram", "target": target} for target in ODD_TARGETS),
    *({"channel": "web", "target": {"chat_id": "p"}, "overrides": overrides} for overrides in BAD_OVERRIDES),
]


@pytest.mark.parametrize("start", REFUSED_STARTS, ids=reprlib.repr)
def test_every_bad_run_start_sample_is_a_4xx_naming_the_problem(
    http: httpx.Client, victim: Victim, start: dict[str, object]
) -> None:
    """Each fixed sample once, as the first run.start of its run (hypothesis may not draw them all)."""
    run = fresh_run("s")
    answer = post(http, run_path(run, "/events"), body([encode({"kind": "run.start", **start})]))
    assert 400 <= answer["status"] < 500, answer
    close_and_read(http, run)


def test_a_raw_line_naming_a_run_id_with_a_lone_surrogate_is_a_4xx(http: httpx.Client) -> None:
    post(http, "/v1/events", b'{"type": "message_start", "run": "\\ud800"}\n')


def test_the_victim_run_was_not_affected(fuzz_stack: FuzzStack, victim: Victim) -> None:
    """Last in the module: the run that streamed beside the fuzzing shows its whole text, once."""
    check_unharmed(fuzz_stack, victim)
