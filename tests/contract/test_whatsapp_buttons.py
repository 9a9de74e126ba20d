"""WhatsApp reply buttons through pywa against the mock Cloud API: the approval's buttons are a reply-buttons message
replying to the question, sent once (a repeat or an unknown outcome never makes a second one); they cannot be taken
off; the mock checks WhatsApp's limits (3 buttons, titles of 20 characters)."""

from __future__ import annotations

import pytest
from pywa.types.callback import Button

from streamrelay.adapters.whatsapp import WhatsAppAdapter
from streamrelay.core.errors import PermanentDeliveryError, UncertainDeliveryError
from streamrelay.core.events import Target
from streamrelay.core.ports import StopControl, TextFormat
from streamrelay.mocks.whatsapp import MockWhatsApp
from tests.contract.conftest import platform_fixtures

TOKEN = "106540352242922:EAAGm0PX4ZCpsBAmockSecretToken0123456789abcdef"
PERSON = "15551234567"
TARGET = Target(chat_id=PERSON)
CONTROL = StopControl("approve:0123456789abcdef:fedcba9876543210", "✅ Approve", more=(("deny:0:1", "❌ Deny"),))

mock, wa = platform_fixtures(
    MockWhatsApp, lambda url: WhatsAppAdapter(TOKEN, base_url=url, send_timeout_s=1.0), adapter="wa"
)


async def test_buttons_are_one_reply_buttons_message_replying_to_the_question(
    mock: MockWhatsApp, wa: WhatsAppAdapter
) -> None:
    question = await wa.send_text(TARGET, "🔐 Refund?", TextFormat.PLAIN)
    await wa.set_stop(TARGET, question, "🔐 Refund?", TextFormat.PLAIN, CONTROL)
    await wa.set_stop(TARGET, question, "🔐 Refund?", TextFormat.PLAIN, CONTROL)  # again: nothing new
    [_, buttons] = mock.messages(PERSON)
    assert buttons.type == "interactive" and buttons.payload["context"]["message_id"] == question
    assert mock.buttons_of(PERSON, buttons.message_id) == list(CONTROL.buttons())
    with pytest.raises(PermanentDeliveryError, match="cannot be taken off"):
        await wa.set_stop(TARGET, question, "🔐 Refund?", TextFormat.PLAIN, None)


async def test_an_unknown_outcome_is_never_sent_twice_without_a_status(mock: MockWhatsApp, wa: WhatsAppAdapter) -> None:
    question = await wa.send_text(TARGET, "🔐 Refund?", TextFormat.PLAIN)
    mock.add_fault("messages", 2, "timeout_after_commit")
    with pytest.raises(UncertainDeliveryError):
        await wa.set_stop(TARGET, question, "🔐 Refund?", TextFormat.PLAIN, CONTROL)
    with pytest.raises(PermanentDeliveryError, match="may have been sent"):
        await wa.set_stop(TARGET, question, "🔐 Refund?", TextFormat.PLAIN, CONTROL)
    assert len(mock.messages(PERSON)) == 2  # the question and one buttons message


async def test_the_mock_refuses_four_buttons_and_a_long_title(mock: MockWhatsApp, wa: WhatsAppAdapter) -> None:
    from pywa.errors import WhatsAppError

    client = wa._conn.client
    with pytest.raises(WhatsAppError) as four:
        await client.send_message(
            PERSON, "Pick", buttons=[Button(title=f"B{i}", callback_data=f"b{i}") for i in range(4)]
        )
    assert four.value.code == 131009
    with pytest.raises(WhatsAppError) as long:
        await client.send_message(PERSON, "Pick", buttons=[Button(title="x" * 21, callback_data="b")])
    assert long.value.code == 131009
    with pytest.raises(ValueError, match="1-3 buttons"):
        await wa.set_stop(
            TARGET, "wamid.x", "", TextFormat.PLAIN, StopControl("a", "A", more=(("b", "B"), ("c", "C"), ("d", "D")))
        )
