"""The live page removes invisible characters from what it shows (issue 25, item 5): the run's events carry the text as
the agent sent it (the run stage removes only control characters and bidi controls), and the page's script applies
adapters/invisible.py's rule (``stripInvisible``) to every string of every event before it writes any of it."""

from __future__ import annotations

from streamrelay.core.events import Source
from tests.browser.conftest import LivePage, WebStack
from tests.browser.test_live_page import END, ended

RUN = "live-invisible"
FAMILY = "👨\u200d👩\u200d👧"
HIDDEN = "\U000e0069\U000e0067\U000e006e\U000e006f\U000e0072\U000e0065"  # 'ignore' in tag characters
SENT = f"pay\u200bpal so\u00adft{HIDDEN} x\u3164y {FAMILY} done"
SHOWN = f"paypal soft xy {FAMILY} done"


async def test_invisible_characters_never_reach_the_live_page(web: WebStack, live: LivePage) -> None:
    child = Source(agent_id="helper", session_id="s-inv", depth=1)
    async with web.client() as client:
        await client.start(RUN, channel="web", chat_id="page")
        await live.page.goto(web.sidecar.watch_url(RUN))
        await live.wait_state("live")
        await client.send(
            RUN,
            [
                {"kind": "status", "text": SENT},
                {"kind": "text", "mode": "delta", "text": SENT, "source": child.model_dump()},
                ended(child),
                {"kind": "text", "mode": "delta", "text": SENT[:9]},
                {"kind": "text", "mode": "delta", "text": SENT[9:]},
            ],
        )
        await client.send(RUN, [END])
        await live.wait_state("ended")
    assert (await live.text("#answer")).strip() == SHOWN
    body = await live.page.evaluate("document.body.innerText")
    assert SHOWN in body
    for ch in ("\u200b", "\u00ad", "\u3164", *HIDDEN):
        assert ch not in body, f"U+{ord(ch):04X} on the page"
    assert FAMILY in body  # an emoji ZWJ sequence is kept


async def test_character_references_never_bring_invisible_characters_to_the_live_page(
    web: WebStack, live: LivePage
) -> None:
    """markdown-it decodes ``&#x200B;`` and kin: outside code they go as the characters would; in code they show as
    written. Split across deltas too (the page strips each delta, then the whole answer it renders)."""
    answer = "pass&#x200B;word &#xE0041;&#xE0042; x&#173;y &ZeroWidthSpace;`c&#x200B;` a&&#x200B;#x200B;b"
    async with web.client() as client:
        await client.start(RUN + "-refs", channel="web", chat_id="page")
        await live.page.goto(web.sidecar.watch_url(RUN + "-refs"))
        await live.wait_state("live")
        await client.send(
            RUN + "-refs",
            [
                {"kind": "text", "mode": "delta", "text": answer[:8]},
                {"kind": "text", "mode": "delta", "text": answer[8:]},
            ],
        )
        await client.send(RUN + "-refs", [END])
        await live.wait_state("ended")
    shown = (await live.text("#answer")).strip()
    assert shown == "password  xy c&#x200B; ab"
    for ch in shown:
        assert ch not in "\u200b\u00ad" and not 0xE0000 <= ord(ch) <= 0xE007F, f"U+{ord(ch):04X} on the page"
