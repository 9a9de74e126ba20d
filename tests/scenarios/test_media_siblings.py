"""The case media-between-paragraphs on every platform and in every delivery mode (its siblings): the same events and
the same expectations, run by the case runner through the real service and each platform's mock (or the web channel's
SSE stream). The case file itself is read unmodified; only its channel's platform and mode change here."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from streamrelay.app.cases import run_case

CASE = Path(__file__).resolve().parent.parent / "cases" / "media-between-paragraphs.json"
MEDIA_CALL = {"telegram": "sendPhoto"}
"""The platform call a photo is (the case bounds it to one); Slack and Discord send it by their message create."""
NATIVE = ("telegram", "slack")
SIBLINGS = [
    pytest.param(platform, mode, id=f"{platform}-{mode}")
    for platform in ("telegram", "slack", "discord", "web")
    for mode in ("preview", "block", "native", "final", "progress")
    if mode != "native" or platform in NATIVE
]


def sibling(platform: str, mode: str) -> dict[str, Any]:
    case: dict[str, Any] = copy.deepcopy(json.loads(CASE.read_text()))
    case["id"] = f"{case['id']}-{platform}-{mode}"
    case["channel"].update(platform=platform, delivery=mode)
    expect = case["expect"]
    if platform not in MEDIA_CALL:
        expect.pop("min_calls"), expect.pop("max_calls")
    if mode == "progress" and platform != "web":  # the status message ("Done.") comes first (the web case runner
        # lists the answer's parts only); the answer and the photo follow, in order
        expect["min_messages"] = expect["max_messages"] = len(expect["chat"]) + 1
        expect["last_message"] = expect.pop("chat")[-1]
    return case


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("platform", "mode"), SIBLINGS)
async def test_media_between_paragraphs_on_every_platform_and_mode(platform: str, mode: str) -> None:
    result = await run_case(sibling(platform, mode), base_dir=CASE.parent.parent)
    assert result.passed, (result.failures, result.transcript.get("chat"))
    chat = [m["text"] for m in result.transcript["chat"]]
    expected = json.loads(CASE.read_text())["expect"]["chat"]
    assert chat[-len(expected) :] == expected  # in order, each once
