"""Where a run ends: an ``end`` ``ok`` after the stream's own bad end (an ``error`` with ``ends``) counts as that
end, in the controller (core/run/controller.py; issue 26). Chat, report and pipeline lane as the person and the parent
loop see them."""

from __future__ import annotations

import pytest

from streamrelay.core.contracts.units import RunEndUnit
from streamrelay.core.events import DeliveryMode, EndStatus, ErrorEvent, Source
from streamrelay.core.records.report import ReportStatus
from streamrelay.core.run.stage import FAILURE_NOTICE, PROGRESS_DONE
from tests.unit.test_run_controller import RUN, delta, end, harness, policy


@pytest.mark.parametrize("status", [EndStatus.ERROR, EndStatus.REFUSED, EndStatus.CUT])
async def test_an_ok_end_after_the_streams_bad_end_counts_as_it(status: EndStatus) -> None:
    h = await harness(policy(DeliveryMode.PREVIEW))
    await h.feed(delta("Half an ans"), ErrorEvent(run=RUN, message="the stream's own words", ends=status))
    report = await h.close(end(EndStatus.OK, final_text="Half an answer, claimed whole"))
    assert h.adapter.chat() == ["Half an ans", f"{FAILURE_NOTICE}\n• the stream's own words"]
    assert report.end_status == str(status) and report.status is ReportStatus.PARTIAL
    last = h.ctl.lane.units[-1]
    assert isinstance(last, RunEndUnit) and (last.status, last.committed) == (status, False)


async def test_the_first_bad_end_decides_and_a_plain_error_or_a_childs_does_not() -> None:
    child = Source(agent_id="helper", session_id="s1")
    h = await harness(policy(DeliveryMode.PROGRESS))
    await h.feed(
        ErrorEvent(run=RUN, message="a tool failed"),
        ErrorEvent(run=RUN, message="the child's stream broke", ends=EndStatus.ERROR, source=child),
        delta("Answer."),
    )
    report = await h.close(end())
    assert report.end_status == "ok" and h.adapter.chat()[0].startswith(PROGRESS_DONE)
    h = await harness(policy(DeliveryMode.FINAL))
    await h.feed(
        ErrorEvent(run=RUN, message="cut", ends=EndStatus.CUT),
        ErrorEvent(run=RUN, message="then failed", ends=EndStatus.ERROR),
    )
    assert (await h.close(end())).end_status == "cut"


async def test_a_runtimes_own_bad_end_is_kept() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW))
    await h.feed(delta("Part"), ErrorEvent(run=RUN, message="cut", ends=EndStatus.CUT))
    assert (await h.close(end(EndStatus.CANCELLED))).end_status == "cancelled"
