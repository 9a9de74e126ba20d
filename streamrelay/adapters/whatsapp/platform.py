"""WhatsApp's registration (:data:`PLATFORM`): the text limit, the throughput and pair rate limits with their sources,
the pywa adapter (imported when the first channel is built), the token variable and the dry-run mock. Imports no
SDK.

Sources (Meta's WhatsApp Cloud API documentation):

- text: ``text.body`` at most 4,096 characters,
  https://developers.facebook.com/docs/whatsapp/cloud-api/messages/text-messages
- throughput: 80 messages a second per business phone number by default (inbound and outbound, every type; 130429
  past it), https://developers.facebook.com/docs/whatsapp/throughput
- pair rate limit: about one message every 6 seconds from one business number to one WhatsApp user, bursts of up to
  45 messages borrowing from later (131056 past it),
  https://developers.facebook.com/docs/whatsapp/cloud-api/overview#pair-rate-limits
- no edits: the Cloud API sends, marks as read and reacts; it has no call that edits or deletes a sent message
  (https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages), so ``edits=False``: a channel's
  ``preview`` (and ``progress``) delivery becomes block replies (:mod:`config.settings`).
- typing: shown until the reply or 25 s, https://developers.facebook.com/documentation/business-messaging/whatsapp/typing-indicators/
"""

from __future__ import annotations

from streamrelay.adapters.platform import DryRunFacts, Platform, PlatformSpec, sdk_adapter, sourced_budget
from streamrelay.core.budgets.rate import BudgetScope
from streamrelay.core.ports import CallKind
from streamrelay.core.units import LengthUnit

TEXT_MESSAGES = "https://developers.facebook.com/docs/whatsapp/cloud-api/messages/text-messages"
THROUGHPUT = "https://developers.facebook.com/docs/whatsapp/throughput"
PAIR_RATE_LIMIT = "https://developers.facebook.com/docs/whatsapp/cloud-api/overview#pair-rate-limits"
TYPING = "https://developers.facebook.com/documentation/business-messaging/whatsapp/typing-indicators/"
NO_EDITS = "https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages"
TEXT_CHARS = 4_096
"""``text.body``: at most 4,096 characters."""


def chat(index: int) -> str:
    """A WhatsApp user's phone number (``wa_id``: digits with the country code, no ``+``), one per ``index``."""
    return f"1555{index:07d}"


def phone_number_id(token: str) -> str | None:
    """The business phone number id of a ``PHONE_NUMBER_ID:ACCESS_TOKEN`` token (never the access token), None when
    the token has no such prefix."""
    head, sep, _ = token.partition(":")
    return head if sep and head.isdigit() else None


SPEC = PlatformSpec(
    max_units=TEXT_CHARS,
    default_limit=TEXT_CHARS,
    unit=LengthUnit.UTF16,
    limit_source=TEXT_MESSAGES,
    # Dismissed at the reply or after 25 s: renewed every 20 s (needs the person's message id: adapter docstring).
    typing_every_s=20.0,
    typing_source=TYPING,
    edits=False,
    edits_source=NO_EDITS,
    budgets=dict(
        [
            # 80 messages a second per business phone number (the default throughput).
            sourced_budget("throughput", BudgetScope.BOT, 80.0, 80, THROUGHPUT, frozenset({CallKind.SEND})),
            # One message every 6 s to one user, bursts of up to 45 borrowed from later.
            sourced_budget("pair", BudgetScope.CHAT, 1 / 6, 45, PAIR_RATE_LIMIT, frozenset({CallKind.SEND})),
        ]
    ),
)

PLATFORM = Platform(
    name="whatsapp",
    spec=SPEC,
    build=sdk_adapter("streamrelay.adapters.whatsapp.adapter", "WhatsAppAdapter"),
    sdk_module="streamrelay.adapters.whatsapp.adapter",
    token_env="WHATSAPP_ACCESS_TOKEN",
    bot_id=phone_number_id,
    dry_run=DryRunFacts(
        mock="streamrelay.mocks.whatsapp:MockWhatsApp",
        default_port=8085,
        # ``PHONE_NUMBER_ID:ACCESS_TOKEN``: the business phone number id the messages are sent from, then the
        # system user's access token (shaped like one: ``EAA`` and letters; never a real secret).
        token="106540352242922:EAAGm0PX4ZCpsBADryRunTokenForTheMockZB0a1b2c3d4e5f",
        private="15550001111",
        group="15550002222",  # the Cloud API has 1:1 chats only here: a second person
        api_path="",
        create_method="messages",
        edit_method="messages",  # no edits: every call is POST /{phone-number-id}/messages
        chat=chat,
        # Block replies (preview needs edits), plain text (the chat's text is then the answer as written), and the
        # pair limit raised as for a test number: a campaign's runs would otherwise wait 6 s per block.
        # The settle window shortened from 30 s: the mock posts its statuses at once (docs/platforms.md, WhatsApp).
        campaign={"delivery": '"block"', "format": '"plain"', "settle_window_ms": "8000"},
        campaign_rates={"pair": {"per_s": "20.0", "burst": "45"}},
        # Uncertain sends are settled by their status webhooks (adapters/whatsapp/settle.py): no double allowed.
        unsettleable=False,
        status_webhook=("/v1/platforms/whatsapp/webhook", "WHATSAPP_APP_SECRET"),
    ),
)
"""WhatsApp (pywa against the WhatsApp Cloud API)."""
