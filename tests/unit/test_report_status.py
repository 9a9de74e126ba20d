"""A run's status word: ``empty`` when it ended well with no answer to show (issue 14), never ``delivered``."""

from __future__ import annotations

from core.events import DeliveryMode
from core.report import PartReport, PartState, ReportStatus, SlotRole, summarize
from tests.unit.test_run_controller import delta, harness, policy


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


async def test_a_run_whose_answer_is_only_whitespace_reports_empty() -> None:
    for mode in (DeliveryMode.PREVIEW, DeliveryMode.BLOCK, DeliveryMode.FINAL):
        h = await harness(policy(mode))
        await h.feed(delta("  \n\n "))
        report = await h.close()
        assert h.adapter.chat() == [] and report.status is ReportStatus.EMPTY, (mode, report)
