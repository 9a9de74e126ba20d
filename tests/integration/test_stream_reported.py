"""Streams shaped as public reports show them (tests/streams/<format>/reported/, README there), replayed exactly as
``streamrelay replay`` sends them through the real sidecar into the mock Telegram chat (issue 26, item 9): what the
person sees and the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamrelay.app.ingest_client import detect_format, recording_lines, replay
from streamrelay.core.run.stage import PROGRESS_DONE
from tests.integration.conftest import INGEST_TOKEN
from tests.integration.test_stream_outcomes import CHAT, sidecar_for

__all__ = ["sidecar_for"]  # the fixture, used by name

pytestmark = pytest.mark.timeout(120)

REPORTED = Path(__file__).resolve().parents[1] / "streams"


async def shown(sidecar_for: Any, name: str, delivery: str) -> tuple[dict[str, Any], list[str]]:
    fmt, stem = name.split("/")
    path = REPORTED / fmt / "reported" / f"{stem}.jsonl"
    mock, url = await sidecar_for(delivery)
    report = await replay(
        url,
        INGEST_TOKEN,
        run=f"{stem}-{delivery}",
        channel="telegram",
        chat_id=CHAT,
        fmt=detect_format(path),
        events=recording_lines(path),
        wait_s=60,
    )
    return report, [m.text for m in mock.messages(CHAT)]


R1_ANSWER = 'There are 3 r\'s in "strawberry": strawberry.'  # as Telegram shows it: the bold is an entity


@pytest.mark.parametrize("delivery", ["preview", "final", "progress"])
async def test_deepseek_r1_reasoning_after_the_templates_think_is_never_the_answer(
    sidecar_for: Any, delivery: str
) -> None:
    report, messages = await shown(sidecar_for, "openai-chat/r1-opened-by-template", delivery)
    assert messages == ([PROGRESS_DONE] if delivery == "progress" else []) + [R1_ANSWER]
    assert report["status"] == "delivered"


async def test_an_a2a_artifact_after_the_final_update_is_not_edited_into_the_answer(sidecar_for: Any) -> None:
    report, messages = await shown(sidecar_for, "a2a/artifact-after-final", "preview")
    assert messages == ["The next train to Porto leaves at 14:05 from platform 3."]
    assert any("after the task's final status update" in e for e in report["errors"]), report["errors"]


async def test_langgraph_middleware_steps_are_no_status_lines(sidecar_for: Any) -> None:
    report, messages = await shown(sidecar_for, "ag-ui/langgraph-middleware-steps", "progress")
    assert report["status"] == "delivered"
    assert messages == [f"{PROGRESS_DONE}\n• model", "The museum opens at 10:00 on Sundays."]  # no middleware hook
