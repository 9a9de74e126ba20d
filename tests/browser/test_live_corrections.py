"""A correction on the live page, in a real Chromium (issue 27, docs/corrections.md): a page that watched the run to
its end shows the corrected answer when the correction is applied (one more ``answer`` event on its stream, which
live.js keeps open past the end with ``&corrections=1``), and a page opened after shows it too."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.conftest import LivePage, WebStack

pytestmark = [pytest.mark.browser, pytest.mark.timeout(60)]
RUN = "corrected-1"
OLD = "Your refund of **49.99 EUR** was declined."
NEW = "Your refund of **49.99 EUR** was approved."


async def test_an_open_page_and_a_page_opened_after_show_the_corrected_answer(
    web: WebStack, live: LivePage, tmp_path: Path
) -> None:
    async with web.client() as client:
        await client.start(RUN, channel="web", chat_id="page")
        await live.page.goto(web.sidecar.watch_url(RUN))
        await live.wait_state("live")
        await client.send(RUN, [{"kind": "text", "mode": "delta", "text": OLD}, {"kind": "end", "status": "ok"}])
        await live.wait_state("ended")
        assert await live.wait_text("#answer-source", lambda t: t == OLD) == OLD
        applied = await client.correct(RUN, "fix-1", NEW)
        assert applied["state"] == "applied", applied
        assert await live.wait_text("#answer-source", lambda t: t == NEW) == NEW  # no reload
        # the rendered answer follows its source within a frame: waited for, not read at once (raced in CI)
        assert "approved" in await live.wait_text("#answer", lambda t: "approved" in t)
        assert await live.state() == "ended"
        await live.snapshot(tmp_path / "live.png")

        later = LivePage(await live.page.context.new_page())
        await later.page.goto(web.sidecar.watch_url(RUN))
        assert await later.wait_text("#answer-source", lambda t: t == NEW) == NEW
        await later.wait_state("ended")
        await later.page.close()
