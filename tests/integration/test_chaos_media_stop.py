"""The chaos judge's rules for media items and a reader's stop (app/chaos/judge_parts.py) on made-up chats, and
the plan's media, stops and media-aimed faults (app/chaos/plan.py)."""

from __future__ import annotations

import random
from typing import Any

from streamrelay.app.chaos.agent import AgentRecord
from streamrelay.app.chaos.answers import Answer, Media, load_recordings, run_lines
from streamrelay.app.chaos.judge import judge
from streamrelay.app.chaos.plan import CREATE, Options, RunPlan, aim_at_media, make_plan
from streamrelay.core.run.stage import STOPPED_NOTICE

PIECES = ("First paragraph of the answer.\n\n", "Second paragraph, ", "with its end.\n\n", "Third and last.")
IMAGE = Media(1, "image", "https://example.com/chaos/r1-1.png", "Chaos media 1 (image) of r1")
FILE = Media(3, "file", "https://example.com/chaos/r1-2.pdf", "Chaos media 2 (file) of r1")
TEXT_1, TEXT_2, TEXT_3 = PIECES[0], PIECES[1] + PIECES[2], PIECES[3]


def _plan(media: tuple[Media, ...] = (IMAGE, FILE), platform: str = "slack") -> RunPlan:
    answer = Answer("made-up", 0, len(PIECES), "short", PIECES)
    lines = run_lines("r1", platform, 1, "preview", answer, media)
    return RunPlan(0, "r1", platform, "preview", 1, answer, lines, (len(lines),), 1.0, (True,), media=media)


def _finished(plan: RunPlan) -> AgentRecord:
    n = len(plan.lines)
    return AgentRecord(plan.run, sent=n, confirmed=n, end_confirmed=True)


def _chat(*texts: str) -> list[dict[str, Any]]:
    return [{"message_id": str(i + 1), "text": t} for i, t in enumerate(texts)]


def _report(
    chat: list[dict[str, Any]], status: str = "delivered", media_states: tuple[str, ...] = ("acked", "acked"), **kw: Any
) -> dict[str, Any]:
    captions = {IMAGE.caption, FILE.caption}
    media_ids = iter([m["message_id"] for m in chat if m["text"] in captions])
    parts = [
        {"role": "media", "state": s, "message_id": next(media_ids, None) if s == "acked" else None}
        for s in media_states
    ]
    acked = sum(s == "acked" for s in media_states)
    ids = [m["message_id"] for m in chat]
    return {"done": True, "status": status, "uncertain": 0, "message_ids": ids, "parts": parts, "media": acked} | kw


def test_media_in_place_between_the_texts_is_exact() -> None:
    plan = _plan()
    assert [line["kind"] for line in plan.lines][1:-2] == ["text", "media", "text", "text", "media", "text"]
    chat = _chat(TEXT_1, IMAGE.caption, TEXT_2, FILE.caption, TEXT_3)
    verdict = judge(plan, _finished(plan), chat, _report(chat), exclusive_bot=True)
    assert not verdict.bad and not verdict.problems and verdict.media_shown == 2


def test_media_out_of_place_is_misplaced() -> None:
    plan = _plan()
    chat = _chat(TEXT_1, TEXT_2, IMAGE.caption, FILE.caption, TEXT_3)
    verdict = judge(plan, _finished(plan), chat, _report(chat), exclusive_bot=True)
    assert verdict.misplaced and verdict.bad and not verdict.lost


def test_a_reported_double_before_a_media_item_does_not_move_it() -> None:
    # chaos seed 5 on teams (before it settled through Graph; the same holds on any platform that cannot settle, here
    # Telegram with a shared bot): a kill with a create in flight, sent again and reported uncertain ("a duplicate is
    # possible"); the judge counted the copy the report does not list and called the media item after it misplaced
    plan = _plan(platform="telegram")
    chat = _chat(TEXT_1, TEXT_1, IMAGE.caption, TEXT_2, FILE.caption, TEXT_3)
    report = _report(chat, "partial", uncertain=1)
    report["message_ids"] = [m["message_id"] for m in chat[1:]]  # the first copy is the uncertain part's
    verdict = judge(plan, _finished(plan), chat, report, exclusive_bot=False)
    assert not verdict.misplaced and verdict.doubled_allowed and not verdict.bad, verdict.problems
    listed = _report(chat, "partial", uncertain=1)  # every copy listed: the item did move
    assert judge(plan, _finished(plan), chat, listed, exclusive_bot=False).misplaced


def test_media_shown_twice_is_doubled_and_missing_is_lost_and_the_report_lies() -> None:
    plan = _plan()
    chat = _chat(TEXT_1, IMAGE.caption, IMAGE.caption, TEXT_2, FILE.caption, TEXT_3)
    verdict = judge(plan, _finished(plan), chat, _report(chat), exclusive_bot=True)
    assert verdict.doubled and verdict.lying
    chat = _chat(TEXT_1, TEXT_2, FILE.caption, TEXT_3)
    report = _report(chat, media_states=("acked", "acked"))
    report["media"] = 2
    verdict = judge(plan, _finished(plan), chat, report, exclusive_bot=True)
    assert verdict.lost and verdict.lying


def test_an_uncertain_media_item_may_be_absent_or_shown_once() -> None:
    plan = _plan()
    absent = _chat(TEXT_1, TEXT_2, FILE.caption, TEXT_3)
    report = _report(absent, "partial", media_states=("uncertain", "acked"), uncertain=1)
    verdict = judge(plan, _finished(plan), absent, report, exclusive_bot=True)
    assert not verdict.bad, verdict.problems
    shown = _chat(TEXT_1, IMAGE.caption, TEXT_2, FILE.caption, TEXT_3)
    report = _report(shown, "partial", media_states=("uncertain", "acked"), uncertain=1)
    report["message_ids"] = ["1", "3", "4", "5"]  # the uncertain item's message is the orphan it counts
    verdict = judge(plan, _finished(plan), shown, report, exclusive_bot=True)
    assert not verdict.bad, verdict.problems
    report["status"] = "delivered"
    assert judge(plan, _finished(plan), absent, report, exclusive_bot=True).lying


def test_a_caption_merged_into_text_is_lost() -> None:
    plan = _plan((IMAGE,))
    chat = _chat(TEXT_1 + IMAGE.caption, TEXT_2 + TEXT_3)
    verdict = judge(plan, _finished(plan), chat, _report(chat, media_states=("pending",)), exclusive_bot=True)
    assert verdict.lost and any("merged" in p for p in verdict.problems)


def _stopped(chat: list[dict[str, Any]], status: str = "partial", notice: str = "acked") -> dict[str, Any]:
    report = _report(chat, status, media_states=())
    report["end_status"] = "cancelled"
    report["errors"] = ["stopped by the reader (chaos:reader): planned stop"]
    report["parts"] = [{"role": "answer", "state": "acked"}, {"role": "notice", "state": notice}]
    return report


def test_a_stopped_run_shows_a_prefix_of_what_was_sent_and_the_notice_once() -> None:
    plan = _plan(())
    record = AgentRecord(plan.run, sent=4, confirmed=2, stopped=True)  # start and three pieces sent
    stop = {"sent": 3, "status": 200}  # the stop was answered when two pieces were sent
    for shown in ("", "First paragraph", TEXT_1 + "Second paragraph,"):
        chat = _chat(*([shown] if shown else []), STOPPED_NOTICE)
        verdict = judge(plan, record, chat, _stopped(chat), exclusive_bot=True, stop=stop)
        assert verdict.stopped and not verdict.bad, (shown, verdict.problems)
    after = _chat(TEXT_1 + TEXT_2, STOPPED_NOTICE)  # text sent after the stop was answered
    assert judge(plan, record, after, _stopped(after), exclusive_bot=True, stop=stop).bad
    twice = _chat(TEXT_1, STOPPED_NOTICE, STOPPED_NOTICE)
    assert judge(plan, record, twice, _stopped(twice), exclusive_bot=True, stop=stop).doubled
    none = _chat(TEXT_1)
    assert judge(plan, record, none, _stopped(none), exclusive_bot=True, stop=stop).lost
    assert not judge(plan, record, none, _stopped(none, notice="uncertain"), exclusive_bot=True, stop=stop).bad
    lie = _chat(TEXT_1, STOPPED_NOTICE)
    assert judge(plan, record, lie, _stopped(lie, "delivered"), exclusive_bot=True, stop=stop).lying


def test_a_stop_racing_the_end_may_end_either_way() -> None:
    plan = _plan(())
    record = _finished(plan)
    stop = {"sent": len(plan.lines), "status": 200}
    whole = _chat(TEXT_1 + TEXT_2 + TEXT_3)
    assert not judge(plan, record, whole, _report(whole, media_states=()), exclusive_bot=True, stop=stop).bad
    cut = _chat(TEXT_1 + TEXT_2 + TEXT_3, STOPPED_NOTICE)
    verdict = judge(plan, record, cut, _stopped(cut), exclusive_bot=True, stop=stop)
    assert verdict.stopped and not verdict.bad, verdict.problems


def test_plan_draws_media_and_stops_and_aims_faults_at_media_sends() -> None:
    plans = make_plan(Options(runs=60, seed=7), load_recordings())
    with_media = [p for p in plans if p.media]
    assert 5 <= len(with_media) <= 30 and 3 <= sum(p.stop is not None for p in plans) <= 20
    for p in with_media:
        assert sum(p.batches) == len(p.lines)
        kinds = [line["kind"] for line in p.lines]
        assert kinds.count("media") == len(p.media) and kinds[-2:] == ["block_end", "end"]
    body = {"faults": [{"method": CREATE["telegram"], "nth": 2, "reply": {"status": 502}}]}
    methods = set()
    rng = random.Random(1)
    for _ in range(20):
        aimed = aim_at_media(rng, body, "telegram", (IMAGE, FILE))
        methods |= {f["method"] for f in aimed["faults"]}
    assert methods == {"sendMessage", "sendPhoto", "sendDocument"}
    assert aim_at_media(
        rng, body | {"faults": [{**body["faults"][0], "method": "chat.postMessage"}]}, "slack", (IMAGE,)
    )
    storm = {"faults": [{"method": "sendMessage", "nth": k, "reply": {"status": 429}} for k in (1, 2)]}
    assert {f["method"] for f in aim_at_media(rng, storm, "telegram", (IMAGE,))["faults"]} == {
        "sendMessage",
        "sendPhoto",
    }


def test_a_message_created_and_gone_from_the_chat_is_lost() -> None:
    plan = _plan(())
    record = AgentRecord(plan.run, sent=4, confirmed=4, stopped=True)
    chat = _chat(STOPPED_NOTICE)
    calls: list[dict[str, Any]] = [
        {"method": "chat.postMessage", "message_id": "7", "ok": True, "text": TEXT_1},
        {"method": "chat.postMessage", "message_id": None, "ok": False, "text": TEXT_2},  # never stored
        {"method": "chat.postMessage", "message_id": "1", "ok": True, "text": STOPPED_NOTICE},
    ]
    verdict = judge(plan, record, chat, _stopped(chat), exclusive_bot=True, stop={"sent": 4}, calls=calls)
    assert verdict.lost and any("gone from the chat" in p for p in verdict.problems)
    assert not judge(plan, record, chat, _stopped(chat), exclusive_bot=True, stop={"sent": 4}, calls=calls[1:]).bad


def test_text_shown_past_a_media_item_that_is_not_shown_is_lost_even_when_stopped() -> None:
    plan = _plan((IMAGE,))
    record = AgentRecord(plan.run, sent=6, confirmed=6, stopped=True)
    before = _chat(TEXT_1, STOPPED_NOTICE)  # stopped at the media item: it is never sent, nothing after it shows
    verdict = judge(plan, record, before, _stopped(before), exclusive_bot=True, stop={"sent": 6})
    assert not verdict.bad, verdict.problems
    past = _chat(TEXT_1, TEXT_2, STOPPED_NOTICE)  # the text went on without the item
    verdict = judge(plan, record, past, _stopped(past), exclusive_bot=True, stop={"sent": 6})
    assert verdict.lost and any("media item" in p for p in verdict.problems)
