"""Agent text made inert in each adapter's render (issue 25, item 5): the invisible-character rule
(adapters/invisible.py) and its copy in the live page's script, Slack's escaping, Telegram's link schemes, media URLs
with credentials refused at ingest, and URL credentials redacted from log lines."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamrelay.adapters.invisible import INVISIBLE, strip_invisible
from streamrelay.adapters.ops.redact import Redactor
from streamrelay.adapters.slack.render import escape_text, inert_markdown, render
from streamrelay.adapters.telegram.render import link_allowed
from streamrelay.adapters.telegram.render import render as telegram_render
from streamrelay.core.errors import IngestError
from streamrelay.core.events import parse_event
from streamrelay.core.media import check_media_url, has_credentials
from streamrelay.core.ports import MarkupPermissions, TextFormat

FLAG = "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"


def tags(letters: str) -> str:
    """``letters`` as Unicode tag characters (U+E0020-U+E007E), invisible."""
    return "".join(chr(0xE0000 + ord(letter)) for letter in letters)


KEPT = [
    "👨\u200d👩\u200d👧",  # an emoji ZWJ sequence
    "🏳\ufe0f\u200d🌈",  # with VS16 before the joiner
    "👍🏽",  # a skin tone modifier
    "🧑🏽\u200d💻",  # a modifier, then the joiner
    "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian needs ZWNJ
    "क्\u200dष",  # Devanagari half forms need ZWJ
    FLAG,  # Scotland: a subdivision flag's tag sequence
    "e\u0301",
    "\u200e\u200f",  # LRM, RLM: implicit marks, kept
    "☺\ufe0e ❤\ufe0f",  # a variation selector after an emoji: text or emoji presentation
    "1\ufe0f\u20e3 #\ufe0f\u20e3 *\u20e3",  # keycaps
    "🏴" + tags("gbeng") + "\U000e007f 🏴" + tags("gbwls") + "\U000e007f",  # England, Wales
    FLAG * 3,  # a flag as often as it is written: it hides nothing
    "葛\U000e0100城",  # an ideographic variation sequence (a Japanese name's glyph)
    "\u2229\ufe00",  # a standardized variation sequence of a math operator
    "\u2813\u2811\u2800\u283a\u2815",  # a braille blank between braille cells: a word space
    "\u1820\u180b",  # a Mongolian free variation selector after its letter
    "שלום",
]
REMOVED = {
    "pay\u200bpal": "paypal",
    "pay\u200dpal": "paypal",
    "pay\u200cpal": "paypal",
    "so\u00adft": "soft",
    "\u3164": "",
    "a\u115f\u1160\uffa0b": "ab",
    "x\U000e0041\U000e0042y": "xy",  # hidden text in tag characters
    "🏴\U000e0041\U000e007f": "🏴",  # not a subdivision flag
    "a\u2060\u2061\u2064b": "ab",
    "\u202eevil\u2066": "evil",
    "a\ufe0f\ufe0f\ufe0fb": "ab",  # a run of variation selectors carries data, not presentation
    "👍\ufe0f\ufe0e\ufe01": "👍\ufe0f",  # ... after an emoji too: the first is kept
    "a\ufe0e": "a",  # a Latin letter has no variation sequence
    "h\ufe01e\ufe02l\ufe03l\ufe04o\U000e0100": "hello",  # one selector per letter: a hidden byte per letter
    "a\U000e0100b\u1820\U000e01efc": "ab\u1820c",  # ideographic variation selectors after no ideograph
    "a\u180bb": "ab",  # a Mongolian selector after no Mongolian letter
    ("🏴" + tags("usca") + "\U000e007f") * 3: "🏴🏴🏴",  # a subdivision no platform draws: 4 hidden letters each
    "🏴" + tags("hidden") + "\U000e007f" + FLAG: "🏴" + FLAG,  # tags spelling text, then a real flag
    FLAG[:-1] + tags("x") + "\U000e007f": "🏴",  # a real flag with one more hidden letter
    "x\u034fy\u180ez\u17b4\u17b5!": "xyz!",  # the grapheme joiner, the vowel separator, Khmer's invisible vowels
    "a\U0001d173\U0001d17ab\U0001bca0": "ab",  # musical and shorthand format characters
    "\u2800\u2800\u2800": "",  # braille blanks: a message that looks empty
    "a\u2800b \u2813\u2800": "ab \u2813",  # ... outside braille text
    "\u200d👍": "👍",  # a joiner at a text's start
    "👍\u200d": "👍",  # ... and at its end
    "👨\u200d\u200d👩": "👨👩",
}


@pytest.mark.parametrize("text", KEPT)
def test_what_a_script_or_an_emoji_needs_is_kept(text: str) -> None:
    assert strip_invisible(text) == text
    sentence = f"x {text} y"
    assert strip_invisible(sentence) is sentence  # returned as it is: no copy


@pytest.mark.parametrize(("text", "expected"), list(REMOVED.items()))
def test_invisible_characters_go(text: str, expected: str) -> None:
    assert strip_invisible(text) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(
            [
                *"ab1 ",
                "\u200d",
                "\u200c",
                "\u200b",
                "👍",
                "\ufe0f",
                "\ufe0e",
                "م",
                "\U000e0061",
                "\u2800",
                "\u2813",
                "葛",
            ]
        )
    )
)
def test_it_is_idempotent(text: str) -> None:
    once = strip_invisible(text)
    assert strip_invisible(once) == once


LIVE_MARKDOWN = Path(__file__).parents[2] / "streamrelay" / "adapters" / "web" / "static" / "live-markdown.js"


@pytest.mark.skipif(shutil.which("node") is None, reason="no node on PATH to run the live page's script")
def test_the_live_pages_script_removes_the_same_characters() -> None:
    samples = [*KEPT, *REMOVED, "".join(KEPT) + "".join(REMOVED)]
    script = (
        "global.window = {};"
        f"require({json.dumps(str(LIVE_MARKDOWN))});"
        "const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "process.stdout.write(JSON.stringify(input.map(window.streamrelayMarkdown.stripInvisible)));"
    )
    done = subprocess.run(
        ["node", "-e", script], input=json.dumps(samples), capture_output=True, text=True, timeout=30, check=True
    )
    assert json.loads(done.stdout) == [strip_invisible(s) for s in samples]


def test_the_pattern_matches_nothing_in_ordinary_text() -> None:
    assert INVISIBLE.search("Hello, world! Ünïcödé 中文 العربية 👍 `code` <b>") is None


# ---------------------------------------------------------------------------------------------------- Slack

CONTROL = ["<!channel>", "<!here>", "<!everyone>", "<!subteam^S0123>", "<@U0123ABCD>", "<#C0123ABCD>"]


@pytest.mark.parametrize("control", CONTROL)
def test_slack_markdown_escapes_each_mention(control: str) -> None:
    body = inert_markdown(f"hi {control} there")
    assert control not in body and "&lt;" + control[1:] in body
    assert inert_markdown(f"hi {control}", MarkupPermissions(mentions=True)) == f"hi {control}"


def test_slack_markdown_escapes_links_and_character_references_and_leaves_code() -> None:
    text = (
        "see <https://evil.example|bank>, &lt;!here&gt; and AT&T; `a<b` `<!DOCTYPE html>`\n```\n<!-- x --> <!here>\n```"
    )
    assert inert_markdown(text) == (
        "see &lt;https://evil.example|bank>, &amp;lt;!here&amp;gt; and AT&T; `a<b` `<!DOCTYPE html>`\n"
        "```\n<!-- x --> &lt;!here>\n```"
    )
    assert "<https://evil.example|bank>" in inert_markdown(text, MarkupPermissions(platform_links=True))


@pytest.mark.parametrize(
    "text",
    [
        "x `fake\n\n<https://evil.example|Click to verify>\n\n` y",  # a code span ends at a paragraph break
        "x `fake\n \t\n<https://evil.example|Click to verify>` y",  # a blank line holding spaces too
        "```a`b\n<https://evil.example|Click to verify>\n```",  # a backtick fence's info string holds no backtick
        "x `a\n> <https://evil.example|Click to verify>\n` y",  # a quote interrupts the paragraph
    ],
)
def test_slack_markdown_escapes_links_in_what_commonmark_does_not_read_as_code(text: str) -> None:
    """BREAKER finding 2: these are not code in CommonMark, so the link must not reach Slack."""
    body = inert_markdown(text)
    assert "<https://evil.example|" not in body and "&lt;https://evil.example|Click to verify>" in body
    assert render(text, TextFormat.MARKDOWN).body == body


def test_slack_markdown_still_leaves_real_code_as_written() -> None:
    text = "`two\nlines <https://a.example|x>` and\n```py\n<https://b.example|y>\n```\n~~~a`b\n<https://c|z>\n~~~"
    assert inert_markdown(text) == text


def test_slack_markdown_without_control_sequences_is_returned_as_it_is() -> None:
    text = "**bold** [a link](https://example.com) a < b > c, 3 & 4"
    assert inert_markdown(text) is text


def test_slack_plain_text_escapes_every_control_character_but_allowed_sequences() -> None:
    assert escape_text("<!here> a<b & c>") == "&lt;!here&gt; a&lt;b &amp; c&gt;"
    assert escape_text("<!here> a<b", MarkupPermissions(mentions=True)) == "<!here> a&lt;b"
    assert escape_text("<https://x|y> <!here>", MarkupPermissions(platform_links=True)) == "<https://x|y> &lt;!here&gt;"


def test_slack_render_removes_invisible_characters_and_measures_what_is_sent() -> None:
    for fmt in TextFormat:
        shown = render("pay\u200bpal <!channel>", fmt)
        assert "\u200b" not in shown.body and "<!channel>" not in shown.body
        assert shown.units == len(shown.body.encode("utf-16-le")) // 2


# ---------------------------------------------------------------------------------------------------- Telegram


@pytest.mark.parametrize(
    ("url", "inert", "mentions", "platform_links"),
    [
        ("https://example.com/x", True, True, True),
        ("http://example.com", True, True, True),
        ("HTTPS://EXAMPLE.COM", True, True, True),
        ("javascript:alert(1)", False, False, False),
        ("data:text/html,x", False, False, False),
        ("file:///etc/passwd", False, False, False),
        ("mailto:a@example.com", False, False, False),
        ("tg://user?id=42", False, True, False),
        ("tg://resolve?domain=x", False, False, True),
        ("example.com", False, False, False),
    ],
)
def test_telegram_link_schemes(url: str, inert: bool, mentions: bool, platform_links: bool) -> None:
    assert link_allowed(url) is inert
    assert link_allowed(url, MarkupPermissions(mentions=True)) is mentions
    assert link_allowed(url, MarkupPermissions(platform_links=True)) is platform_links


def test_telegram_render_drops_refused_links_but_keeps_their_text() -> None:
    shown = telegram_render(
        "[a](javascript:alert(1)) [b](https://x.example) [c](tg://user?id=1)\u200b", TextFormat.MARKDOWN
    )
    assert shown.text == "a b c"
    assert [(e.type, e.url) for e in shown.entities or []] == [("text_link", "https://x.example")]


# ---------------------------------------------------------------------------------------------------- credentials

SECRET = "s3cr3t-Passw0rd"


@pytest.mark.parametrize(
    "url",
    [f"https://alice:{SECRET}@files.example/a.png", f"https://{SECRET}@files.example/a.png", f"http://a:{SECRET}@h"],
)
def test_a_media_url_with_credentials_is_refused_with_a_422_that_does_not_repeat_it(url: str) -> None:
    assert has_credentials(url)
    with pytest.raises(ValueError, match="credentials"):
        check_media_url(url)
    with pytest.raises(IngestError) as refused:
        parse_event({"kind": "media", "run": "r", "url": url, "media_kind": "image"})
    assert refused.value.status == 422
    assert SECRET not in str(refused.value) and "user:password@" in str(refused.value)


@pytest.mark.parametrize(
    "url", ["https://files.example/a@2x.png", "https://h.example/x?sig=a@b&user=x", "http://h:80/"]
)
def test_an_at_sign_after_the_host_is_no_credential(url: str) -> None:
    assert not has_credentials(url)
    assert check_media_url(url) == url


def test_another_bad_event_is_still_a_400() -> None:
    with pytest.raises(IngestError) as refused:
        parse_event({"kind": "media", "run": "r", "url": "ftp://files.example/a.png", "media_kind": "image"})
    assert refused.value.status == 400


def test_a_urls_credentials_never_reach_a_log_line() -> None:
    line = f"GET https://alice:{SECRET}@files.example/a.png then ssh://bob:{SECRET}@h and a@b.example"
    redacted = Redactor().text(line)
    assert SECRET not in redacted
    assert "https://<redacted>@files.example/a.png" in redacted and "a@b.example" in redacted
