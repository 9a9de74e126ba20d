"""Fuzzing the ingest contract over real HTTP (issue 12, item 7): raw provider streams (valid and broken), posted to
a real sidecar while a victim run streams through it. Every body gets a 2xx or a 4xx that names the problem (a valid
stream a 200), never a 5xx, never a hang; reads of the runs never fail; the victim's answer shows once, whole.

The tests of this module run in file order: the victim starts with the first and is checked by the last. The
fuzzing of the ingest contract is four modules (test_ingest_fuzz*.py), each with its own sidecar and victim, so
that xdist spreads them over its workers (tests/fuzz/victim.py).
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
