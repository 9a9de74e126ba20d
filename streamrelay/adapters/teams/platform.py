"""Microsoft Teams' registration (:data:`PLATFORM`): the message size limit (a chunk length in UTF-16 units of source
and a rendered limit in bytes of the message's JSON in UTF-16), the per-conversation and per-app rate limits with
their sources, the Teams SDK adapter (imported when the first channel is built), the credentials variable and the
dry-run mock. Imports no SDK.

Sources (Microsoft Learn, Teams platform documentation):

- size: a bot message is at most about 100 KB, the whole message encoded as UTF-16; keep it within 80 KB; past the
  limit 413 ``MessageSizeTooBig``,
  https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/format-your-bot-messages
- rate limits: per bot per thread (a personal chat, a group chat or a channel), "send to conversation": 7 operations
  in 1 s, 8 in 2 s, 60 in 30 s, 1,800 in 3,600 s; per app per tenant 50 requests a second; every request counts
  (messages, updates, deletes, typing); past them 429,
  https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/rate-limit
- native streaming: one-to-one chats only, one request a second per stream, two minutes at most,
  https://learn.microsoft.com/en-us/microsoftteams/platform/bots/streaming-ux
"""

from __future__ import annotations

from streamrelay.adapters.platform import DryRunFacts, Platform, PlatformSpec, sdk_adapter, sourced_budget
from streamrelay.core.budgets.rate import BudgetScope
from streamrelay.core.ports import CallKind
from streamrelay.core.units import LengthUnit

FORMAT = "https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/format-your-bot-messages"
RATE_LIMIT = "https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/rate-limit"
PER_THREAD = RATE_LIMIT + "#per-bot-per-thread-limit"
STREAMING = "https://learn.microsoft.com/en-us/microsoftteams/platform/bots/streaming-ux"
MESSAGE_BYTES = 102_400
"""About 100 KB: the whole message in UTF-16 (the mock's hard limit)."""
RENDERED_MAX = 81_920
"""80 KB, Microsoft's advice for a message to be delivered surely: what the adapter's ``measure`` counts (the bytes of
the message's JSON in UTF-16) and each message is checked against."""
BYTES_PER_UNIT = 4
"""Bytes one UTF-16 unit of source takes in the message's JSON, with a margin: 2 for a character, 4 for one escaped
(``\\n``, ``"``), a little for Markdown turned into a card's elements."""
DEFAULT_CHUNK = 16_000
"""A channel's default ``limit``: UTF-16 units of source per message, under RENDERED_MAX // BYTES_PER_UNIT = 20,480 so
that a chunk's rendering fits whatever it holds."""
MAX_CHUNK = RENDERED_MAX // 2
"""The largest ``limit`` a channel may set (40,960 UTF-16 units): every unit takes at least 2 bytes."""
DRY_RUN_TENANT = "00000000-0000-4000-8000-00000000a7e1"
"""The tenant a dry run or a chaos campaign names for its Graph token (the mock grants any GUID tenant)."""
PRIVATE = "a:1DryRunPersonalChatWithTheMock"
GROUP = "19:dryrunchannel@thread.tacv2"
"""A team's channel: its posts have reply chains (sub-agent threads); the case runner's "group"."""


def chat(index: int) -> str:
    """A group chat's conversation id (``19:…@thread.v2``), one per ``index``."""
    return f"19:chaos{index:05d}@thread.v2"


def native_chat(index: int) -> str:
    """A personal chat's conversation id (``a:…``), one per ``index``: Teams streams only in one-on-one chats."""
    return f"a:1Chaos{index:05d}PersonalChat"


def app_id(token: str) -> str | None:
    """The bot's Microsoft App ID (a GUID) from ``APP_ID:CLIENT_SECRET[:TENANT_ID]`` (never the secret), None when the
    token does not start with one."""
    head, sep, _ = token.partition(":")
    return head if sep and len(head) == 36 and head.count("-") == 4 else None


SPEC = PlatformSpec(
    max_units=MAX_CHUNK,
    default_limit=DEFAULT_CHUNK,
    unit=LengthUnit.UTF16,
    limit_source=FORMAT,
    rendered_max=RENDERED_MAX,
    rendered_unit=f"each message is also checked on its rendering: at most {RENDERED_MAX} bytes of its JSON in UTF-16",
    native=True,  # personal chats: typing activities with a streaminfo entity, then the final message
    budgets=dict(
        [
            # Per bot per thread: 7 in 1 s, 8 in 2 s, 60 in 30 s. A bucket of 4 refilled at 1.8 a second stays under
            # all three (5.8 in 1 s, 7.6 in 2 s, 58 in 30 s); every call counts, typing too.
            sourced_budget("per_thread", BudgetScope.CHAT, 1.8, 4, PER_THREAD, frozenset(CallKind) - {CallKind.TYPING}),
            # ... and 1,800 in an hour: 0.4 a second with a burst of 360 (360 + 1,440 = 1,800 in the first hour).
            sourced_budget(
                "per_thread_hour", BudgetScope.CHAT, 0.4, 360, PER_THREAD, frozenset(CallKind) - {CallKind.TYPING}
            ),
            # A native stream: one request a second (STREAMING); 0.9 paced, a margin for the network's jitter (a
            # request granted at 1.0 s arrived 997 ms after the one before and met 429 in the mock).
            sourced_budget(
                "stream",
                BudgetScope.CHAT,
                0.9,
                1,
                STREAMING,
                frozenset({CallKind.STREAM_START, CallKind.STREAM_UPDATE, CallKind.STREAM_FINISH}),
            ),
            # Per app per tenant: 50 requests a second; 45 paced.
            sourced_budget("per_app", BudgetScope.BOT, 45.0, 10, RATE_LIMIT, frozenset(CallKind) - {CallKind.TYPING}),
        ]
    ),
)

PLATFORM = Platform(
    name="teams",
    spec=SPEC,
    build=sdk_adapter("streamrelay.adapters.teams.adapter", "TeamsAdapter"),
    sdk_module="streamrelay.adapters.teams.adapter",
    token_env="TEAMS_BOT_CREDENTIALS",
    bot_id=app_id,
    dry_run=DryRunFacts(
        mock="streamrelay.mocks.teams:MockTeams",
        default_port=8086,
        token="00000000-0000-4000-8000-0000000000b7:DryRun~SecretForTheMock.0a1b2c",
        private=PRIVATE,
        group=GROUP,
        api_path="",
        create_method="sendToConversation",
        edit_method="updateActivity",
        chat=chat,
        # A campaign's chat compares text with the answer's Markdown: Teams shows headings in bold and tables in a
        # card, so the campaign sends plain text (as Telegram's, whose Markdown becomes entities). Its bot settles
        # uncertain sends through Microsoft Graph (adapters/teams/graph.py), as an operator who granted the bot
        # ChatMessage.Read.Chat does: the mock serves Graph over the activities it stored. A settle that finds nothing
        # reads again for 3 s (settle_window_ms) before the part is sent again.
        campaign={
            "format": '"plain"',
            "settle_with_graph": "true",
            "graph_tenant": f'"{DRY_RUN_TENANT}"',
            "settle_window_ms": "3000",
        },
        # Settled through Graph: no double allowed. Without settle_with_graph (or without the permission) an
        # uncertain send is reported, as before (docs/platforms.md, Microsoft Teams).
        unsettleable=False,
        # Streams only in one-on-one chats (https://learn.microsoft.com/en-us/microsoftteams/platform/bots/streaming-ux):
        # every streaming activity (informative, streaming, final) is a sendToConversation.
        native_chat=native_chat,
        native_methods=("sendToConversation",),
    ),
)
"""Microsoft Teams (the Teams SDK for Python against the Bot Framework Connector)."""
