"""Fuzzing the ingest contract over real HTTP (issue 12, item 7): valid, broken and hostile NDJSON bodies and raw
provider streams, posted to a real sidecar while a victim run streams through it. Every body gets a 2xx or a 4xx that
names the problem, never a 5xx, never a hang; reads of the runs never fail; the victim's answer shows once, whole.

The tests of this module run in file order: the victim starts with the first and is checked by the last.
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.checks import check_counted, check_error, close_and_read, fresh_run, post, run_path
from tests.fuzz.conftest import FuzzStack, fuzz_settings
from tests.fuzz.provider_strategies import ProviderBody, provider_bodies
from tests.fuzz.samples import BAD_OVERRIDES, BAD_TARGETS, HOSTILE_RUN_IDS, ODD_TARGETS
from tests.fuzz.strategies import (
    VICTIM_CHAT,
    body,
    encode,
    multi_run_bodies,
    run_bodies,
    run_start,
    texts,
    valid_run_lines,
    with_runs,
)
from tests.fuzz.victim import Victim

pytestmark = [
    pytest.mark.timeout(240),
    # A failing example of a huge line would be printed whole: hypothesis warns, and warnings are errors here.
    pytest.mark.filterwarnings("ignore:Generating overly large repr:hypothesis.errors.HypothesisWarning"),
]


@pytest.fixture(scope="module")
def victim(fuzz_stack: FuzzStack) -> Iterator[Victim]:
    """The well-behaved run streaming beside the fuzzing (checked by the module's last test)."""
    streaming = Victim(fuzz_stack.url)
    streaming.start()
    yield streaming
    streaming.finish()  # idempotent stop when the last test did not run (-k)


@fuzz_settings(max_examples=300)
@given(template=run_bodies())
def test_a_run_body_gets_a_2xx_or_a_4xx_naming_the_problem(http: httpx.Client, victim: Victim, template: bytes) -> None:
    run = fresh_run("r")
    data = with_runs(template, run)
    answer = post(http, run_path(run, "/events"), data)
    check_counted(answer, data)
    close_and_read(http, run)


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


def test_a_raw_line_naming_a_run_id_with_a_lone_surrogate_is_a_4xx(http: httpx.Client) -> None:
    post(http, "/v1/events", b'{"type": "message_start", "run": "\\ud800"}\n')


def test_the_victim_run_was_not_affected(fuzz_stack: FuzzStack, victim: Victim) -> None:
    """Last in the module: the run that streamed beside the fuzzing shows its whole text, once."""
    text = victim.finish()
    # served, never starved: each of its requests answered 200 and accepted (a request the fuzzing held up past the
    # client's hang guard, HANG_GUARD_S, is a failure here); how long the slowest took is printed, not bounded (no
    # timing asserts: on a loaded machine any request may take seconds)
    print(
        f"\nthe victim streamed {len(victim.log.pieces)} pieces; its slowest request took {victim.log.slowest_s:.2f} s"
    )
    assert victim.log.failures == []
    assert len(victim.log.pieces) > 20, "the victim hardly streamed: was the fuzzing running beside it?"
    report = victim.report()
    assert report["status"] == "delivered", report
    shown = fuzz_stack.visible(VICTIM_CHAT)
    assert " ".join(shown).split() == text.split()
