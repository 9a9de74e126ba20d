"""A run's status word: ``empty`` when it ended well with no answer to show (issue 14), never ``delivered``."""

from __future__ import annotations

from dataclasses import replace

from streamrelay.core.events import DeliveryMode, EndStatus
from streamrelay.core.records.report import PartReport, PartState, ReportStatus, SlotRole, summarize, with_gaps
from tests.unit.fakes import settle
from tests.unit.test_run_controller import delta, end, harness, policy


def _part(role: SlotRole, state: PartState = PartState.ACKED, chars: int = 12) -> PartReport:
    return PartReport(slot=0, role=role, state=state, message_id="1", chars=chars)


def test_an_answer_confirmed_is_delivered() -> None:
    assert summarize("r", "c", [_part(SlotRole.ANSWER)], done=True, end_status="ok").status is ReportStatus.DELIVERED


def test_a_run_that_ended_well_with_nothing_to_show_is_empty() -> None:
    assert summarize("r", "c", [], done=True, end_status="ok").status is ReportStatus.EMPTY
    status_only = [_part(SlotRole.STATUS), _part(SlotRole.ANSWER, PartState.SKIPPED, 0)]
    assert summarize("r", "c", status_only, done=True, end_status="ok").status is ReportStatus.EMPTY


def test_empty_is_only_for_a_run_that_ended_well() -> None:
    assert summarize("r", "c", [], done=False).status is ReportStatus.PENDING
    assert summarize("r", "c", [], done=True, end_status="error").status is ReportStatus.FAILED
    lost = [_part(SlotRole.ANSWER, PartState.FAILED)]
    assert summarize("r", "c", lost, done=True, end_status="ok").status is ReportStatus.FAILED


def test_a_run_that_lost_input_is_never_empty() -> None:
    """docs/ingest.md: a gap "is reported and makes the report partial"; its lost lines may have held the answer (a
    run of seq 0 run.start and seq 2 end, seq 1 never sent, reported ``empty`` with ``gaps: ["seq 1..1 never
    arrived"]``)."""
    report = with_gaps(summarize("r", "c", [], done=True, end_status="ok"), ["seq 1..1 never arrived"])
    assert report.status is ReportStatus.PARTIAL


async def test_a_run_whose_answer_is_only_whitespace_reports_empty() -> None:
    for mode in (DeliveryMode.PREVIEW, DeliveryMode.BLOCK, DeliveryMode.FINAL):
        h = await harness(policy(mode))
        await h.feed(delta("  \n\n "))
        report = await h.close()
        assert h.adapter.chat() == [] and report.status is ReportStatus.EMPTY, (mode, report)


async def test_a_typing_indicator_is_taken_down_however_the_run_ends() -> None:
    """Slack's assistant status stays two minutes unless cleared: every end of a run that showed "typing…"
    clears it (the adapter decides whether its platform needs a call)."""
    for text, status in (("", EndStatus.OK), ("an answer", EndStatus.OK), ("half an", EndStatus.ERROR)):
        h = await harness(replace(policy(DeliveryMode.PREVIEW), typing_every_s=4.0))
        await settle()  # the indicator goes at once: the person waits from the start
        if text:
            await h.feed(delta(text))
        await h.close(end(status))
        assert h.adapter.calls_of("send_typing") and h.adapter.cleared == [h.ctl.start_event.target], text
    quiet = await harness(policy(DeliveryMode.PREVIEW))  # no indicator shown: nothing to clear
    await quiet.feed(delta("an answer"))
    await quiet.close()
    assert quiet.adapter.cleared == []
