"""WhatsApp's closed customer service window through pywa against the mock Cloud API: the channel's approved
template goes instead (once per closed window), the refusal says so; the mock sends templates in a closed window and
refuses unknown ones (132001) and a wrong parameter count (132000)."""

from __future__ import annotations

import pytest

from streamrelay.adapters.whatsapp import WhatsAppAdapter
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.errors import ForbiddenError
from streamrelay.core.events import Target
from streamrelay.core.ports import TextFormat
from streamrelay.mocks.whatsapp import MockWhatsApp
from tests.contract.conftest import platform_fixtures

TOKEN = "106540352242922:EAAGm0PX4ZCpsBAmockSecretToken0123456789abcdef"
PERSON = "15551234567"
TARGET = Target(chat_id=PERSON)
ANSWER = "## Your refund\n\nThe refund of 49.99 EUR was   approved.\n\nDetails follow."

mock, wa = platform_fixtures(
    MockWhatsApp, lambda url: WhatsAppAdapter(TOKEN, base_url=url, send_timeout_s=5.0), adapter="wa"
)


def shown(mock: MockWhatsApp) -> list[str]:
    return [text for _, text in mock.visible(PERSON)]


async def test_a_closed_window_sends_the_template_with_the_first_line_once(
    mock: MockWhatsApp, wa: WhatsAppAdapter
) -> None:
    wa.use_window_template("streamrelay_answer_waiting", "en_US")
    mock.closed_windows.add(PERSON)
    with pytest.raises(ForbiddenError) as first:
        await wa.send_text(TARGET, ANSWER, TextFormat.MARKDOWN)
    [(wamid, text)] = mock.visible(PERSON)
    assert text == "An answer to your question is ready: Your refund. Reply to this message to read it."
    assert "131047" in str(first.value) and f"'streamrelay_answer_waiting' (en_US) was sent instead as {wamid}" in str(
        first.value
    )
    with pytest.raises(ForbiddenError, match="not sent again"):  # the next part of the answer: no second template
        await wa.send_text(TARGET, "Details follow.", TextFormat.MARKDOWN)
    assert len(shown(mock)) == 1

    mock.user_message(PERSON, "ok")  # the person replies: the window is open, the answer can go (the desk resends)
    await wa.send_text(TARGET, ANSWER, TextFormat.MARKDOWN)
    mock.closed_windows.add(PERSON)  # a day later, closed again: the template goes again
    with pytest.raises(ForbiddenError, match="was sent instead"):
        await wa.send_text(TARGET, "Later", TextFormat.PLAIN)
    assert [t.startswith("An answer") for t in shown(mock)] == [True, False, True]


async def test_a_fixed_text_fills_the_template(mock: MockWhatsApp, wa: WhatsAppAdapter) -> None:
    wa.use_window_template("streamrelay_answer_waiting", "en_US", "fixed", "your support request")
    mock.closed_windows.add(PERSON)
    with pytest.raises(ForbiddenError):
        await wa.send_text(TARGET, ANSWER, TextFormat.MARKDOWN)
    assert shown(mock) == [
        "An answer to your question is ready: your support request. Reply to this message to read it."
    ]


async def test_an_unknown_template_is_132001_and_the_report_says_so(mock: MockWhatsApp, wa: WhatsAppAdapter) -> None:
    wa.use_window_template("not_approved", "en_US")
    mock.closed_windows.add(PERSON)
    with pytest.raises(ForbiddenError) as info:
        await wa.send_text(TARGET, ANSWER, TextFormat.MARKDOWN)
    assert "131047" in str(info.value) and "could not be sent" in str(info.value) and "132001" in str(info.value)
    assert shown(mock) == []


async def test_a_wrong_parameter_count_is_132000(mock: MockWhatsApp, wa: WhatsAppAdapter) -> None:
    wa.use_window_template("streamrelay_answer_waiting", "en_US", "none")
    mock.closed_windows.add(PERSON)
    with pytest.raises(ForbiddenError, match="132000"):
        await wa.send_text(TARGET, ANSWER, TextFormat.MARKDOWN)


async def test_without_a_template_131047_stays_a_clear_failure(mock: MockWhatsApp, wa: WhatsAppAdapter) -> None:
    mock.closed_windows.add(PERSON)
    with pytest.raises(ForbiddenError, match="only a template message may be sent") as info:
        await wa.send_text(TARGET, ANSWER, TextFormat.MARKDOWN)
    assert "template" not in str(info.value).split("only a template")[0] and shown(mock) == []


def test_the_channel_setting_is_checked() -> None:
    table = {"platform": "whatsapp", "window_template": {"name": "answer_waiting", "language": "en_US"}}
    assert ChannelSettings.model_validate(table).window_template is not None
    with pytest.raises(ValueError, match="only WhatsApp has a customer service window"):
        ChannelSettings.model_validate({**table, "platform": "matrix"})
    with pytest.raises(ValueError, match='text is set exactly when parameter = "fixed"'):
        ChannelSettings.model_validate(
            {"platform": "whatsapp", "window_template": {"name": "a", "language": "en", "parameter": "fixed"}}
        )
