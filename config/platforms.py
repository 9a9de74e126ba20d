"""What streamrelay knows of each platform: text limits and default rate budgets, each with its source.

A channel's ``limit`` may lower the platform's text limit, never raise it; its ``[rate.NAME]`` tables
override these budgets field by field (same name) or add new ones. ../shared/PLATFORMS.md lists the facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.ports import CallKind
from core.rate import MESSAGE_CALLS, Budget, BudgetScope
from core.units import LengthUnit

TELEGRAM_FAQ = "https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this"
SLACK_RATE_LIMITS = "https://docs.slack.dev/apis/web-api/rate-limits"
DISCORD_RATE_LIMITS = "https://discord.com/developers/docs/topics/rate-limits"


@dataclass(frozen=True)
class SourcedBudget:
    """A default :class:`~core.rate.Budget` and the documentation URL its numbers come from."""

    budget: Budget
    source: str


@dataclass(frozen=True)
class PlatformSpec:
    """One platform's delivery facts.

    Attributes:
        max_units: the most text one message may hold, in ``unit``.
        default_limit: the limit used when a channel sets none (Slack recommends about 4,000 characters).
        unit: how length is counted; UTF-16 units are safe where the platform counts code points.
        limit_source: documentation URL of the limit.
        budgets: default rate budgets by name.
        native: the platform streams by itself (``delivery = "native"``): Telegram sendMessageDraft, Slack
            chat.startStream.
        typing_every_s: how often a typing indicator is shown again while a run shows nothing new (an
            indicator lasts a few seconds: it must be renewed), None when the platform has none.
        typing_source: documentation URL of the indicator's lifetime.
        live_text: the platform is the sidecar's own live page, whose watchers see each message's text.
    """

    max_units: int
    default_limit: int
    unit: LengthUnit
    limit_source: str
    budgets: dict[str, SourcedBudget] = field(default_factory=dict)
    native: bool = False
    typing_every_s: float | None = None
    typing_source: str = ""
    live_text: bool = False


def _b(
    name: str, scope: BudgetScope, per_s: float, burst: float, source: str, calls: frozenset[CallKind] | None = None
) -> tuple[str, SourcedBudget]:
    return name, SourcedBudget(Budget(name, scope, per_s, burst, calls or MESSAGE_CALLS), source)


PLATFORMS: dict[str, PlatformSpec] = {
    "telegram": PlatformSpec(
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
                _b("per_chat", BudgetScope.CHAT, 1.0, 2, TELEGRAM_FAQ),
                # 20 messages per minute per group; 19 paced evenly keeps a margin.
                _b("per_group", BudgetScope.GROUP, 19 / 60, 1, TELEGRAM_FAQ),
                # About 30 messages per second per bot; 25 paced evenly: the calls reach Telegram with some jitter
                # (replicas, a busy loop), and 30 grants 40 ms apart still span more than a second with 150 ms of it.
                _b("per_bot", BudgetScope.BOT, 25.0, 1, TELEGRAM_FAQ),
            ]
        ),
    ),
    "slack": PlatformSpec(
        # `markdown_text` holds at most 12,000 characters; about 4,000 per message is recommended.
        max_units=12_000,
        default_limit=4_000,
        unit=LengthUnit.UTF16,
        limit_source="https://docs.slack.dev/reference/methods/chat.postMessage",
        native=True,  # https://docs.slack.dev/reference/methods/chat.startStream
        # In threads only: the assistant thread status "is typing…" stays until the app replies; renewed
        # every 30 s (Tier 3) so a status lost on the client comes back.
        typing_every_s=30.0,
        typing_source="https://docs.slack.dev/reference/methods/assistant.threads.setStatus",
        budgets=dict(
            [
                # chat.postMessage: about 1 per second per channel (a new stream posts a message too).
                _b(
                    "post_per_channel",
                    BudgetScope.CHAT,
                    1.0,
                    1,
                    SLACK_RATE_LIMITS,
                    frozenset({CallKind.SEND, CallKind.STREAM_START}),
                ),
                # chat.update: Tier 3, 50 per minute per workspace, shared by every channel; 48 paced.
                _b(
                    "update_per_workspace",
                    BudgetScope.BOT,
                    48 / 60,
                    1,
                    "https://docs.slack.dev/reference/methods/chat.update",
                    frozenset({CallKind.EDIT}),
                ),
                # chat.delete: Tier 3, 50 per minute per workspace; 48 paced.
                _b(
                    "delete_per_workspace",
                    BudgetScope.BOT,
                    48 / 60,
                    1,
                    "https://docs.slack.dev/reference/methods/chat.delete",
                    frozenset({CallKind.DELETE}),
                ),
                # chat.startStream / chat.stopStream: Tier 2, 20 per minute per workspace; 19 paced.
                _b(
                    "stream_start_stop",
                    BudgetScope.BOT,
                    19 / 60,
                    1,
                    "https://docs.slack.dev/reference/methods/chat.startStream",
                    frozenset({CallKind.STREAM_START, CallKind.STREAM_FINISH}),
                ),
                # chat.appendStream: Tier 4, 100 per minute per workspace; 95 paced.
                _b(
                    "stream_append",
                    BudgetScope.BOT,
                    95 / 60,
                    1,
                    "https://docs.slack.dev/reference/methods/chat.appendStream",
                    frozenset({CallKind.STREAM_UPDATE}),
                ),
            ]
        ),
    ),
    "discord": PlatformSpec(
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
                _b("per_channel", BudgetScope.CHAT, 0.9, 1, DISCORD_RATE_LIMITS),
                # 50 requests per second per bot, all routes; 45 paced keeps a margin.
                _b("global", BudgetScope.BOT, 45.0, 1, DISCORD_RATE_LIMITS, frozenset(CallKind)),
            ]
        ),
    ),
    "web": PlatformSpec(
        # The sidecar's own live run page: no platform limit; one part is kept under 65,536 UTF-16 units so that
        # one SSE event stays small. No rate limits (nothing leaves the process), no typing indicator.
        max_units=65_536,
        default_limit=65_536,
        unit=LengthUnit.UTF16,
        limit_source="https://html.spec.whatwg.org/multipage/server-sent-events.html",
        live_text=True,
    ),
}
"""The platforms channels can be configured for."""
