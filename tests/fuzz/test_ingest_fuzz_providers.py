"""Fuzzing the ingest contract (what every fuzz module checks, and how they share the work: tests/fuzz/__init__.py):
raw provider streams, valid (a 200) and broken.
"""

from __future__ import annotations

import httpx
from hypothesis import given

from tests.fuzz.checks import close_and_read, fresh_run, post, run_path
from tests.fuzz.conftest import FUZZ_MARKS, FuzzStack, fuzz_settings
from tests.fuzz.provider_strategies import ProviderBody, provider_bodies
from tests.fuzz.strategies import with_runs
from tests.fuzz.victim import Victim, check_unharmed

pytestmark = FUZZ_MARKS


@fuzz_settings(max_examples=200)
@given(case=provider_bodies())
def test_a_provider_stream_gets_a_2xx_or_a_4xx_naming_the_problem(
    http: httpx.Client, victim: Victim, case: ProviderBody
) -> None:
    run = fresh_run(f"p-{case.fmt}")
    data = with_runs(case.data, run)
    answer = post(http, run_path(run, "/events"), data)
    if case.valid:
        assert answer["status"] == 200, answer
    close_and_read(http, run)


def test_the_victim_run_was_not_affected(fuzz_stack: FuzzStack, victim: Victim) -> None:
    """Last in the module: the run that streamed beside the fuzzing shows its whole text, once."""
    check_unharmed(fuzz_stack, victim)
