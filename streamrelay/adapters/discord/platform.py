"""Discord's registration (:data:`PLATFORM`): REST limits and budgets with their sources, the discord.py adapter
(imported when the first channel is built), the token variable and the dry-run mock. Imports no SDK."""

from __future__ import annotations

from streamrelay.adapters.platform import DryRunFacts, Platform, PlatformSpec, sdk_adapter, sourced_budget
from streamrelay.core.budgets.rate import BudgetScope
from streamrelay.core.ports import CallKind
from streamrelay.core.units import LengthUnit

DISCORD_RATE_LIMITS = "https://discord.com/developers/docs/topics/rate-limits"


def chat(index: int) -> int:
    """A channel snowflake (https://discord.com/developers/docs/reference#snowflakes), one per ``index``."""
    return 1_300_000_000_000_000_000 + index


SPEC = PlatformSpec(
    # Message `content` up to 2000 characters; UTF-16 units are the safe count.
    max_units=2000,
    default_limit=2000,
    unit=LengthUnit.UTF16,
    limit_source="https://discord.com/developers/docs/resources/message#create-message",
    # The typing indicator shows about 10 seconds or until the bot sends a message: renew every 8 s.
    typing_every_s=8.0,
    typing_source="https://discord.com/developers/docs/resources/channel#trigger-typing-indicator",
    budgets=dict(
        [
            # About 5 messages per 5 s per channel (observed); 0.9 per second paced never reaches 5 in 5 s.
            sourced_budget("per_channel", BudgetScope.CHAT, 0.9, 1, DISCORD_RATE_LIMITS),
            # 50 requests per second per bot, all routes; 45 paced keeps a margin.
            sourced_budget("global", BudgetScope.BOT, 45.0, 1, DISCORD_RATE_LIMITS, frozenset(CallKind)),
        ]
    ),
)

PLATFORM = Platform(
    name="discord",
    spec=SPEC,
    build=sdk_adapter("streamrelay.adapters.discord.adapter", "DiscordAdapter"),
    sdk_module="streamrelay.adapters.discord.adapter",
    token_env="DISCORD_BOT_TOKEN",
    dry_run=DryRunFacts(
        mock="streamrelay.mocks.discord:MockDiscord",
        default_port=8083,
        token="MTAwMTAwMTAwMTAwMTAwMQ.GdRyRn.dry-run-token-for-the-mock-discord-api",
        private=1001001001001001001,
        group=1001001001001001002,
        api_path="/api/v10",
        create_method="createMessage",
        edit_method="editMessage",
        chat=chat,
        campaign={"throttle_ms": "1200"},  # about 5 messages per 5 s per channel
    ),
)
"""Discord (discord.py, REST only)."""
