"""Slack's registration (:data:`PLATFORM`): Web API limits and budgets with their sources, the slack-sdk adapter
(imported when the first channel is built), the token variable and the dry-run mock. Imports no SDK."""

from __future__ import annotations

from streamrelay.adapters.platform import DryRunFacts, Platform, PlatformSpec, sdk_adapter, sourced_budget
from streamrelay.core.budgets.rate import BudgetScope
from streamrelay.core.ports import CallKind
from streamrelay.core.units import LengthUnit

SLACK_RATE_LIMITS = "https://docs.slack.dev/apis/web-api/rate-limits"


def chat(index: int) -> str:
    """A channel id (``C…``, https://docs.slack.dev/reference/objects/conversation-object), one per ``index``."""
    return f"C0CHAOS{index:05d}"


def native_chat(index: int) -> str:
    """A direct message's id (``D…``), one per ``index``: Slack streams only into a thread of one."""
    return f"D0CHAOS{index:05d}"


SPEC = PlatformSpec(
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
            sourced_budget(
                "post_per_channel",
                BudgetScope.CHAT,
                1.0,
                1,
                SLACK_RATE_LIMITS,
                frozenset({CallKind.SEND, CallKind.STREAM_START}),
            ),
            # chat.update: Tier 3, 50 per minute per workspace, shared by every channel: 42 a minute with a burst of
            # 7 is at most 49 in any 60 s, across restarts too (a restart's budget begins from the ledger's calls of
            # the last minute, core/budgets/history.py), and spends after an outage the edits it saved.
            sourced_budget(
                "update_per_workspace",
                BudgetScope.BOT,
                42 / 60,
                7,
                "https://docs.slack.dev/reference/methods/chat.update",
                frozenset({CallKind.EDIT}),
            ),
            # chat.delete: Tier 3, 50 per minute per workspace; 48 paced.
            sourced_budget(
                "delete_per_workspace",
                BudgetScope.BOT,
                48 / 60,
                1,
                "https://docs.slack.dev/reference/methods/chat.delete",
                frozenset({CallKind.DELETE}),
            ),
            # chat.startStream / chat.stopStream: Tier 2, 20 per minute per workspace; 19 paced.
            sourced_budget(
                "stream_start_stop",
                BudgetScope.BOT,
                19 / 60,
                1,
                "https://docs.slack.dev/reference/methods/chat.startStream",
                frozenset({CallKind.STREAM_START, CallKind.STREAM_FINISH}),
            ),
            # chat.appendStream: Tier 4, 100 per minute per workspace; 95 paced.
            sourced_budget(
                "stream_append",
                BudgetScope.BOT,
                95 / 60,
                1,
                "https://docs.slack.dev/reference/methods/chat.appendStream",
                frozenset({CallKind.STREAM_UPDATE}),
            ),
        ]
    ),
)

PLATFORM = Platform(
    name="slack",
    spec=SPEC,
    build=sdk_adapter("streamrelay.adapters.slack.adapter", "SlackAdapter"),
    sdk_module="streamrelay.adapters.slack.adapter",
    token_env="SLACK_BOT_TOKEN",
    dry_run=DryRunFacts(
        mock="streamrelay.mocks.slack:MockSlack",
        default_port=8082,
        token="xoxb-1001-2002-DRYrunTOKENforTHEmock",
        private="D0DRYRUN01",
        group="C0DRYRUN01",
        api_path="/api/",
        create_method="chat.postMessage",
        edit_method="chat.update",
        chat=chat,
        thread_id="1700000000.000100",
        # chat.startStream streams into a thread, in a channel only with recipient ids a target lacks: a direct
        # message's thread (https://docs.slack.dev/reference/methods/chat.startStream).
        native_chat=native_chat,
        native_methods=("chat.startStream", "chat.appendStream", "chat.stopStream"),
    ),
)
"""Slack (slack-sdk against the Web API)."""
