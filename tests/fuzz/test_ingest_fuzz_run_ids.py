"""Fuzzing the ingest contract (what every fuzz module checks, and how they share the work: tests/fuzz/__init__.py):
hostile run ids, in the path and in the lines (drawn, and each fixed sample once); a run id no route can hold gets a
JSON 404.
"""

from __future__ import annotations

import reprlib

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.checks import check_counted, check_error, close_and_read, post, run_path
from tests.fuzz.conftest import FUZZ_MARKS, FuzzStack, fuzz_settings
from tests.fuzz.samples import HOSTILE_RUN_IDS
from tests.fuzz.strategies import body, encode, run_start, texts, with_runs
from tests.fuzz.victim import Victim, check_unharmed

pytestmark = FUZZ_MARKS


path_run_ids = (st.sampled_from(HOSTILE_RUN_IDS) | texts).filter(lambda run: bool(run) and "/" not in run)


@fuzz_settings(max_examples=150)
@given(run=path_run_ids, start=run_start(run=""))
def test_a_hostile_run_id_in_the_path_gets_a_2xx_or_a_4xx_naming_the_problem(
    http: httpx.Client, victim: Victim, run: str, start: dict[str, object]
) -> None:
    del start["run"]  # the run is the path's
    data = with_runs(body([encode(start), encode({"kind": "text", "text": "hi"}), encode({"kind": "end"})]), "")
    answer = post(http, run_path(run, "/events"), data)
    check_counted(answer, data)
    close_and_read(http, run)


@pytest.mark.parametrize("run", HOSTILE_RUN_IDS, ids=reprlib.repr)
def test_every_hostile_run_id_sample_gets_a_2xx_or_a_4xx_naming_the_problem(
    http: httpx.Client, victim: Victim, run: str
) -> None:
    start = encode({"kind": "run.start", "run": run, "channel": "web", "target": {"chat_id": "p"}})
    post(http, "/v1/events", body([start, encode({"kind": "end", "run": run})]))
    if run and "/" not in run:  # a path no route matches: test_a_run_id_no_route_can_hold_gets_a_json_404
        post(http, run_path(run, "/events"), body([start]))
        close_and_read(http, run)


@pytest.mark.parametrize("run", ["a/b", "../x", ""])
def test_a_run_id_no_route_can_hold_gets_a_json_404(http: httpx.Client, run: str) -> None:
    data = body([encode({"kind": "run.start", "channel": "web", "target": {"chat_id": "p"}})])
    for answer in (
        http.post(f"/v1/runs/{run}/events", content=data),
        http.get(f"/v1/runs/{run}"),
        http.get(f"/v1/runs/{run}/pipeline"),
    ):
        assert 400 <= answer.status_code < 500, answer.text
        check_error(answer)


def test_the_victim_run_was_not_affected(fuzz_stack: FuzzStack, victim: Victim) -> None:
    """Last in the module: the run that streamed beside the fuzzing shows its whole text, once."""
    check_unharmed(fuzz_stack, victim)
