"""Telegram's registration (:data:`PLATFORM`): Bot API limits and budgets with their sources, the aiogram adapter
(imported when the first channel is built), the token variable and the dry-run mock. Imports no SDK."""

from __future__ import annotations

from streamrelay.adapters.platform import DryRunFacts, Platform, PlatformSpec, sdk_adapter, sourced_budget
from streamrelay.core.budgets.rate import BudgetScope
from streamrelay.core.units import LengthUnit

TELEGRAM_FAQ = "https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this"


def bot_id(token: str) -> str:
    """The bot's id: the digits before ``:`` in its token (https://core.telegram.org/bots/api#authorizing-your-bot);
    never the secret after it."""
    return token.partition(":")[0]


def chat(index: int) -> int:
    """A private chat (even ``index``) or a supergroup (odd: its message ids are its own, so an id probe can prove a
    send did not land; https://core.telegram.org/bots/api#chat), one per ``index``."""
    return 7_000_000 + index if index % 2 == 0 else -1_007_000_000_000 - index


def native_chat(index: int) -> int:
    """A private chat (sendMessageDraft streams only there), one per ``index``: the even runs' chats of :func:`chat`
    and the ids between them."""
    return 7_000_000 + index


SPEC = PlatformSpec(
    # 1-4096 characters after entity parsing; the server counts code points, entities UTF-16 units.
    max_units=4096,
    default_limit=4096,
    unit=LengthUnit.UTF16,
    limit_source="https://core.telegram.org/bots/api#sendmessage",
    native=True,  # https://core.telegram.org/bots/api#sendmessagedraft
    # "typing" lasts 5 seconds or less: renew about every 4 s.
    typing_every_s=4.0,
    typing_source="https://core.telegram.org/bots/api#sendchataction",
    budgets=dict(
        [
            # About 1 message per second per chat, short bursts allowed, then 429.
            sourced_budget("per_chat", BudgetScope.CHAT, 1.0, 2, TELEGRAM_FAQ),
            # 20 messages per minute per group; 19 paced evenly keeps a margin.
            sourced_budget("per_group", BudgetScope.GROUP, 19 / 60, 1, TELEGRAM_FAQ),
            # About 30 messages per second per bot; 25 paced evenly: the calls reach Telegram with some jitter
            # (replicas, a busy loop), and 30 grants 40 ms apart still span more than a second with 150 ms of it.
            sourced_budget("per_bot", BudgetScope.BOT, 25.0, 1, TELEGRAM_FAQ),
        ]
    ),
)

PLATFORM = Platform(
    name="telegram",
    spec=SPEC,
    build=sdk_adapter("streamrelay.adapters.telegram.adapter", "TelegramAdapter"),
    sdk_module="streamrelay.adapters.telegram.adapter",
    token_env="TELEGRAM_BOT_TOKEN",
    bot_id=bot_id,
    dry_run=DryRunFacts(
        mock="streamrelay.mocks.telegram:MockTelegram",
        default_port=8081,
        token="123456:DRY-run-token-for-the-mock-bot-api",
        private=1001,
        group=-1001001,
        api_path="",
        create_method="sendMessage",
        edit_method="editMessageText",
        chat=chat,
        media_methods={"image": "sendPhoto", "file": "sendDocument", "audio": "sendAudio", "video": "sendVideo"},
        # Markdown is rendered to text + entities (the chat's text then lacks the markup): plain, so a campaign can
        # compare the chat's text with the answer.
        campaign={"format": '"plain"'},
        # Drafts stream in private chats only (https://core.telegram.org/bots/api#sendmessagedraft); the finished
        # answer is a sendMessage.
        native_chat=native_chat,
        native_methods=("sendMessageDraft", "sendMessage"),
    ),
)
"""Telegram (aiogram 3 against the Bot API)."""
