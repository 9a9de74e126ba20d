"""The chaos campaign's native mode (streamrelay/app/chaos/plan.py, judge.py): where the plan puts native runs, and
how the judge reads the mocks' native streams."""

from __future__ import annotations

from typing import Any

from streamrelay.app.chaos.agent import AgentRecord
from streamrelay.app.chaos.answers import load_recordings
from streamrelay.app.chaos.judge import judge
from streamrelay.app.chaos.plan import MODES, NATIVE_PLATFORMS, Options, RunPlan, make_plan


def plans(**options: Any) -> list[RunPlan]:
    return make_plan(Options(runs=60, seed=5, **options), load_recordings())


def test_native_alone_runs_on_the_native_platforms_in_chats_they_stream_in() -> None:
    native = plans(modes=("native",))
    assert {p.platform for p in native} == set(NATIVE_PLATFORMS) == {"telegram", "slack", "teams"}
    for plan in native:
        start = plan.lines[0]
        assert plan.mode == start["mode"] == "native" and start["target"] == {"chat_id": plan.chat_id}
        assert str(plan.chat_id).startswith(("D", "a:")) or int(plan.chat_id) > 0  # a DM, a personal or private chat
        assert plan.pace_ms * len(plan.lines) >= 1500  # streams past the throttle: a stream opens and grows
        for fault in plan.fault.body.get("faults", []) if plan.fault else []:
            assert fault["method"] not in ("chat.postMessage", "chat.update", "editMessageText", "updateActivity")


def test_native_among_the_modes_leaves_the_other_runs_as_the_seed_drew_them() -> None:
    without = {p.run: p for p in plans(modes=("preview", "block"))}
    mixed = plans(modes=MODES)
    turned = [p for p in mixed if p.mode == "native"]
    assert 5 <= len(turned) <= 20 and {p.platform for p in turned} <= set(NATIVE_PLATFORMS)
    for plan in mixed:
        before = without[plan.run]
        assert (plan.kill, plan.media, plan.stop, plan.approval, plan.correction, plan.places) == (
            before.kill,
            before.media,
            before.stop,
            before.approval,
            before.correction,
            before.places,
        )
        if plan.mode != "native":
            assert (plan.mode, plan.chat_id, plan.lines, plan.fault, plan.pace_ms) == (
                before.mode,
                before.chat_id,
                before.lines,
                before.fault,
                before.pace_ms,
            )


def _judged(streams: list[dict[str, Any]], report: dict[str, Any], chat: list[dict[str, Any]]) -> Any:
    plan = next(p for p in plans(modes=("native",)) if p.platform == "slack" and not p.media and not p.stop)
    record = AgentRecord(plan.run, sent=len(plan.lines), confirmed=len(plan.lines), end_confirmed=True)
    return judge(plan, record, chat, report, exclusive_bot=True, streams=streams), plan


def test_a_stream_left_open_after_the_report_says_done_is_unfinished_and_a_lie_if_delivered() -> None:
    plan = next(p for p in plans(modes=("native",)) if p.platform == "slack" and not p.media and not p.stop)
    chat = [{"message_id": "1.2", "text": plan.answer.text}]
    report = {"done": True, "status": "delivered", "uncertain": 0, "message_ids": ["1.2"]}
    stopped, _ = _judged([{"message_id": "1.2", "state": "stopped", "text": plan.answer.text}], report, chat)
    assert not stopped.bad and not stopped.problems
    left, _ = _judged([{"message_id": "1.2", "state": "open", "text": plan.answer.text}], report, chat)
    assert left.unfinished and left.lying and left.bad


def test_a_stream_start_never_answered_and_reported_uncertain_is_an_allowed_double() -> None:
    plan = next(p for p in plans(modes=("native",)) if p.platform == "slack" and not p.media and not p.stop)
    head = plan.answer.text[:40]
    chat = [{"message_id": "1.1", "text": head}, {"message_id": "1.2", "text": plan.answer.text}]
    streams = [{"message_id": "1.1", "state": "open", "text": head}]
    reported = {"done": True, "status": "partial", "uncertain": 1, "message_ids": ["1.2"]}
    verdict, _ = _judged(streams, reported, chat)
    assert verdict.doubled and verdict.doubled_allowed and not verdict.lying and not verdict.unfinished
    assert not verdict.bad
    hidden = {**reported, "uncertain": 0, "status": "delivered"}
    verdict, _ = _judged(streams, hidden, chat)
    assert verdict.lying and verdict.bad
