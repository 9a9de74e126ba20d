"""Fan-out (issue 29, item 1): one run, several places. The planning of a ``run.start`` with ``targets``, and the
relay delivering one run to three in-memory chats: the answer once in each, one place failing alone, a restart
resumed in every place, Stop and approvals across places, a client's channels enforced."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streamrelay.app.chaos.answers import load_recordings
from streamrelay.app.chaos.campaign import place_report
from streamrelay.app.chaos.plan import FANOUT_CHAT_OFFSET, Options, chat_id, make_plan
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.errors import ForbiddenError, IngestError
from streamrelay.core.events import DeliveryMode, Place, RunCorrect, Target, parse_event
from streamrelay.core.ingest.clients import ClientLimits
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.corrections import CorrectionState
from streamrelay.core.records.journal import MemoryJournal
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.records.report import PlaceReport, ReportStatus
from streamrelay.core.run.corrections import Corrections
from streamrelay.core.run.fanout import combined_status, place_ledger_run, place_start
from streamrelay.core.run.monitor import RunMonitor
from streamrelay.core.run.relay import Relay
from tests.unit.fakes import FakeAdapter, MemoryChat

TARGETS = [
    {"channel": "a", "target": {"chat_id": 1}},
    {"channel": "b", "target": {"chat_id": "C2"}, "mode": "block"},
    {"channel": "c", "target": {"chat_id": 3}, "overrides": {"throttle_ms": 0}},
]
START: dict[str, Any] = {"kind": "run.start", "targets": TARGETS}
ANSWER = "Your order shipped on Monday. It arrives on Thursday."


# --- planning ---------------------------------------------------------------------------------------------------


def test_a_run_start_with_targets_names_each_place_with_its_mode_and_overrides() -> None:
    start = parse_event({**START, "run": "r", "mode": "final", "overrides": {"throttle_ms": 500}})
    assert start.kind == "run.start"
    places = start.places()
    assert [(p.channel, p.target.chat_id) for p in places] == [("a", 1), ("b", "C2"), ("c", 3)]
    assert [p.mode for p in places] == [DeliveryMode.FINAL, DeliveryMode.BLOCK, DeliveryMode.FINAL]
    assert [p.overrides for p in places] == [{"throttle_ms": 500}, {"throttle_ms": 500}, {"throttle_ms": 0}]
    assert (start.channel, start.target) == ("a", Target(chat_id=1))  # the first place's
    second = place_start(start, 1)
    assert (second.run, second.channel, second.target, second.mode, second.targets) == (
        "r",
        "b",
        Target(chat_id="C2"),
        DeliveryMode.BLOCK,
        None,
    )
    assert place_start(start, 0) is start
    assert [place_ledger_run("r", i) for i in range(3)] == ["r", "r/to:1", "r/to:2"]


def test_a_run_start_without_targets_has_its_one_place() -> None:
    start = parse_event({"kind": "run.start", "run": "r", "channel": "a", "target": {"chat_id": 1}, "mode": "block"})
    assert start.kind == "run.start"
    assert start.places() == [Place(channel="a", target=Target(chat_id=1), mode=DeliveryMode.BLOCK, overrides={})]


@pytest.mark.parametrize(
    ("targets", "extra", "says"),
    [
        ([], {}, "'targets' is empty: name 1 to 8 places"),
        ([TARGETS[0], TARGETS[0]], {}, "twice"),
        (TARGETS, {"channel": "b"}, "first place's"),
        ([TARGETS[0]] * 9, {}, "at most 8 items"),
        ([{"channel": "a"}], {}, "target"),
    ],
)
def test_a_bad_targets_list_is_refused_saying_what_is_wrong(
    targets: list[dict[str, Any]], extra: dict[str, Any], says: str
) -> None:
    with pytest.raises(IngestError, match=says):
        parse_event({"kind": "run.start", "run": "r", "targets": targets, **extra})


def _row(status: ReportStatus) -> PlaceReport:
    return PlaceReport(channel="a", target={"chat_id": 1}, ledger_run="r", done=True, status=status)


def test_the_run_status_over_its_places() -> None:
    delivered, failed = ReportStatus.DELIVERED, ReportStatus.FAILED
    assert combined_status([_row(delivered)] * 3, done=True) is delivered
    assert combined_status([_row(failed)] * 2, done=True) is failed
    assert combined_status([_row(delivered), _row(failed)], done=True) is ReportStatus.PARTIAL
    assert combined_status([_row(delivered)] * 2, done=False) is ReportStatus.PENDING


# --- the relay --------------------------------------------------------------------------------------------------


def _relay(chats: dict[str, Any], ledger: MemoryLedger | None = None, **kw: Any) -> Relay:
    runtimes = {name: ChannelRuntime(ChannelPolicy(name=name, throttle_s=0), chat) for name, chat in chats.items()}
    return Relay(runtimes, ledger or MemoryLedger(), MonotonicClock(), **kw)


def _chats() -> dict[str, Any]:
    return {"a": MemoryChat(), "b": MemoryChat(), "c": MemoryChat()}


async def _answer(relay: Relay, run: str = "r") -> None:
    await relay.submit_line({**START, "seq": 0}, run)
    await relay.submit_line({"kind": "text", "seq": 1, "text": ANSWER[:20]}, run)
    await relay.submit_line({"kind": "text", "seq": 2, "text": ANSWER[20:]}, run)
    await relay.submit_line({"kind": "end", "seq": 3}, run)


async def test_one_run_shows_its_answer_once_in_each_place_and_reports_each() -> None:
    chats = _chats()
    ledger = MemoryLedger()
    relay = _relay(chats, ledger)
    await _answer(relay)
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert {name: list(chat.messages.values()) for name, chat in chats.items()} == {n: [ANSWER] for n in chats}
    assert report is not None and report.status == "delivered" and report.done
    assert [(p.channel, p.ledger_run, p.status) for p in report.places] == [
        ("a", "r", "delivered"),
        ("b", "r/to:1", "delivered"),
        ("c", "r/to:2", "delivered"),
    ]
    assert [p.message_ids for p in report.places] == [list(chat.messages) for chat in chats.values()]
    assert report.message_ids == report.places[0].message_ids  # the first place's, as a one-place reader reads
    for run in ("r", "r/to:1", "r/to:2"):  # every place's own ledger records, each ended
        record = await ledger.get_run(run)
        assert record is not None and record.ended
    rebuilt = await _relay(_chats(), ledger).report("r")  # another process: the report rebuilt from the ledger
    assert rebuilt is not None and rebuilt.status == "delivered" and rebuilt.done
    assert [(p.channel, p.ledger_run, p.status, p.message_ids) for p in rebuilt.places] == [
        (p.channel, p.ledger_run, p.status, p.message_ids) for p in report.places
    ]


async def test_a_run_to_one_place_has_no_place_rows() -> None:
    chats = _chats()
    relay = _relay(chats)
    await relay.submit_line({"kind": "run.start", "channel": "b", "target": {"chat_id": 5}}, "r")
    await relay.submit_line({"kind": "text", "text": ANSWER}, "r")
    await relay.submit_line({"kind": "end"}, "r")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert report is not None and report.status == "delivered" and report.places == []
    assert list(chats["b"].messages.values()) == [ANSWER] and not chats["a"].messages


async def test_a_place_that_fails_does_not_hold_or_lose_the_others() -> None:
    clock = MonotonicClock()
    broken = FakeAdapter(clock)
    broken.fail("send_text", range(1, 50), ForbiddenError("the bot was removed from the chat", platform="fake"))
    chats: dict[str, Any] = {"a": MemoryChat(), "b": broken, "c": MemoryChat()}
    relay = _relay(chats)
    await _answer(relay)
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert list(chats["a"].messages.values()) == [ANSWER] and list(chats["c"].messages.values()) == [ANSWER]
    assert broken.chat() == []
    assert report is not None and report.status == "partial"
    assert [p.status for p in report.places] == ["delivered", "failed", "delivered"]
    assert any(e.startswith("b (r/to:1)") for e in report.errors)


async def test_an_interrupted_fan_out_run_resumes_in_every_place_and_shows_each_final_once() -> None:
    journal, ledger, chats = MemoryJournal(), MemoryLedger(), _chats()
    relay = _relay(chats, ledger, journal=journal)
    await relay.submit_line({**START, "seq": 0}, "r")
    await relay.submit_line({"kind": "text", "seq": 1, "text": ANSWER[:20]}, "r")
    await asyncio.sleep(0.05)  # some places may show the first part before the stop
    await relay.submit_line({"kind": "text", "seq": 2, "text": ANSWER[20:]}, "r")
    await relay.submit_line({"kind": "end", "seq": 3}, "r")
    await relay.close()  # the process stops before (or while) the run finalizes
    assert await journal.unfinished() == ["r"]

    restarted = _relay(chats, ledger, journal=journal)
    assert await restarted.resume() == ["r"]
    report = await restarted.wait_done("r", 5)
    await restarted.close()
    assert report is not None and report.status == "delivered"
    for chat in chats.values():
        assert "".join(chat.messages.values()).replace(" ", "") == ANSWER.replace(" ", "")  # once, whole


async def test_a_stop_stops_the_run_in_every_place() -> None:
    chats = _chats()
    relay = _relay(chats)
    await relay.submit_line({**START, "seq": 0}, "r")
    await relay.submit_line({"kind": "text", "seq": 1, "text": ANSWER[:20]}, "r")
    await relay.stop("r", by="U1", reason="enough")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert report is not None and report.end_status == "cancelled"
    assert [p.end_status for p in report.places] == ["cancelled"] * 3
    for chat in chats.values():  # each place says it stopped, once, after what it showed of the answer
        shown = list(chat.messages.values())
        assert shown[-1] == "⏹ Stopped." and shown.count("⏹ Stopped.") == 1
        assert all(ANSWER.startswith(text) for text in shown[:-1])


async def test_a_client_fans_out_only_to_channels_it_may_use() -> None:
    limits = ClientLimits(name="k", channels=frozenset({"a", "b"}))
    chats = _chats()
    relay = _relay(chats, clients={limits.name: limits})
    with pytest.raises(IngestError, match="unknown channel 'c': the channels you may use are a, b") as caught:
        await relay.submit_line({**START, "run": "k/r"})
    assert caught.value.status == 400
    assert relay.active_runs() == []
    await relay.submit_line({**START, "run": "k/r2", "targets": TARGETS[:2]})
    await relay.submit_line({"kind": "text", "run": "k/r2", "text": ANSWER})
    await relay.submit_line({"kind": "end", "run": "k/r2"})
    report = await relay.wait_done("k/r2", 5)
    await relay.close()
    assert report is not None and report.status == "delivered" and len(report.places) == 2
    assert not chats["c"].messages


async def test_a_replayed_fan_out_start_must_name_the_same_places() -> None:
    relay = _relay(_chats())
    await relay.submit_line(START, "r")
    await relay.submit_line(START, "r")  # the same: a harmless replay
    with pytest.raises(IngestError, match="targets"):
        await relay.submit_line({**START, "targets": TARGETS[:2]}, "r")
    await relay.close()


async def test_a_correction_of_a_fan_out_run_applies_in_every_place() -> None:
    clock = MonotonicClock()
    chats: dict[str, Any] = {name: FakeAdapter(clock) for name in ("a", "b", "c")}
    ledger = MemoryLedger()
    relay = _relay(chats, ledger)
    await _answer(relay)
    report = await relay.wait_done("r", 5)
    assert report is not None and report.status == "delivered"
    corrections = Corrections(ledger, ledger, relay.channels, clock)
    fixed = "Your order shipped on Tuesday. It arrives on Friday."
    record = await corrections.submit("r", RunCorrect(id="c1", text=fixed))
    again = await corrections.submit("r", RunCorrect(id="c1", text=fixed))  # sent again: applied once
    await relay.close()
    assert record.state is CorrectionState.APPLIED and again.state is CorrectionState.APPLIED
    assert {name: chat.chat() for name, chat in chats.items()} == {name: [fixed] for name in chats}
    assert [len(chat.calls_of("edit_text")) for chat in chats.values()] == [1, 1, 1]
    for run in ("r/to:1", "r/to:2"):  # each place keeps its own record
        kept = await ledger.correction(run, "c1")
        assert kept is not None and kept.state is CorrectionState.APPLIED


async def test_an_approval_is_asked_in_every_place_and_shown_decided_in_all() -> None:
    chats = _chats()
    relay = _relay(chats)
    ask = {
        "kind": "approval.request",
        "seq": 1,
        "id": "a1",
        "question": "Deploy?",
        "approvers": ["a:user:1"],
        "ttl_s": 60.0,
    }
    await relay.submit_lines([({**START, "seq": 0}, None), (ask, None)], "r")
    await asyncio.wait_for(_each_shows(chats, "Deploy?"), 5)
    decided = await relay.decide_approval("r", "a1", "approve", "a:user:1")
    assert decided["decision"] == "approved"
    await asyncio.wait_for(_each_shows(chats, "Approved by a:user:1"), 5)  # decided, and by whom, in every place
    await relay.submit_line({"kind": "end", "seq": 2}, "r")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert report is not None and report.done
    units = [u.model_dump(mode="json") for u in relay.pipeline("r") or []]
    assert [u["decision"] for u in units if u["kind"] == "approval"] == ["approved"]  # one unit for the agent


async def _each_shows(chats: dict[str, Any], words: str) -> None:
    while not all(any(words in text for text in chat.messages.values()) for chat in chats.values()):
        await asyncio.sleep(0.01)


# --- the chaos campaign's fan-out runs ---------------------------------------------------------------------------


def test_the_chaos_plan_fans_some_plain_runs_out_to_another_platform() -> None:
    plans = make_plan(Options(runs=60, seed=5), load_recordings())
    fanned = [plan for plan in plans if plan.places]
    assert 3 <= len(fanned) <= 25
    for plan in fanned:
        assert not plan.media and plan.stop is None and plan.approval is None and plan.correction is None
        ((other, chat),) = plan.places
        assert other != plan.platform and chat == chat_id(other, plan.index + FANOUT_CHAT_OFFSET)
        start = parse_event(plan.lines[0])
        assert start.kind == "run.start"
        assert [(p.channel, p.target.chat_id) for p in start.places()] == [(plan.platform, plan.chat_id), (other, chat)]
        assert sum(plan.batches) == len(plan.lines)


def test_a_fan_out_report_is_judged_place_by_place() -> None:
    rows: list[dict[str, Any]] = [{"channel": "telegram", "status": "delivered", "done": True}, {"channel": "slack"}]
    report: dict[str, Any] = {"run": "r", "status": "partial", "done": True, "message_ids": ["1"], "places": rows}
    assert place_report(report, 0) == {**report, **rows[0], "places": []}
    assert place_report(report, 1) == {**report, **rows[1], "places": []}
    assert place_report(report, 2) is None
    one = {"run": "r", "status": "delivered", "places": []}
    assert place_report(one, 0) is one and place_report(None, 0) is None


async def test_watchers_see_each_place_on_a_row_of_its_own_and_the_answer_once() -> None:
    chats = _chats()
    relay = _relay(chats)
    targets = [*TARGETS, {"channel": "a", "target": {"chat_id": 9}}]  # the same channel twice: rows apart
    await relay.submit_line({**START, "targets": targets, "seq": 0}, "r")
    monitor = relay.monitor("r")  # the run's own, while it is active
    assert isinstance(monitor, RunMonitor)
    await relay.submit_line({"kind": "text", "seq": 1, "text": ANSWER}, "r")
    await relay.submit_line({"kind": "end", "seq": 2}, "r")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert report is not None and report.status == "delivered"
    wire = [event.wire() for event in monitor.since(0)]
    rows = {event["channel"] for event in wire if event["type"] == "delivery"}
    assert rows == {"a", "b", "c", "a → 9"}
    answers = [event for event in wire if event["type"] == "answer"]
    assert "".join(str(a.get("append", a.get("text", ""))) for a in answers) == ANSWER  # one copy of the answer
