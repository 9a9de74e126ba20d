"""A channel's delivery policy as the core sees it: plain values, no platform, no file.

``config/`` builds one from ``channels.toml``; the case runner builds one from a case's ``channel``.
"""

from __future__ import annotations

import enum
import reprlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from streamrelay.core.chunking import BreakKind, ChunkParams, chunk_text
from streamrelay.core.delivery.send_chain import MAX_RETRY_AFTER_S
from streamrelay.core.errors import IngestError
from streamrelay.core.events import DeliveryMode
from streamrelay.core.json_types import JsonValue
from streamrelay.core.ports import TextFormat
from streamrelay.core.text.coalescer import CoalesceParams
from streamrelay.core.units import LengthUnit


class SubagentPolicy(enum.StrEnum):
    """``hidden``: only the root's answer; ``status``: one status line per child; ``thread``: each child in
    its own thread where the platform has threads (falls back to ``status`` until that exists)."""

    HIDDEN = "hidden"
    STATUS = "status"
    THREAD = "thread"


class ReasoningPolicy(enum.StrEnum):
    HIDDEN = "hidden"
    SHOWN = "shown"


@dataclass(frozen=True, slots=True)
class ChannelPolicy:
    """How one channel delivers.

    Attributes:
        name: the channel's name in the configuration.
        delivery: the delivery mode (DESIGN §5).
        max_units: the chunk length: the most source text one message holds, in ``unit``, where the chunker cuts
            (Telegram: 4096 UTF-16 units, https://core.telegram.org/bots/api#sendmessage).
        unit: the length unit of ``max_units``.
        render_limit: the most one message may measure once rendered, in the unit of the adapter's ``measure``,
            where it differs from ``max_units`` (Matrix: 63,488 bytes of the edit's JSON while the chunker cuts
            UTF-16 units); None: ``max_units``. Read it as :attr:`rendered_max`.
        fmt: ``plain`` or ``markdown`` (rendered by the adapter).
        throttle_s: minimum seconds between preview calls (0: every change is sent).
        block_chunk: chunker parameters for ``block`` mode (``max_chars`` is capped at ``max_units``).
        coalesce: coalescer parameters for ``block`` mode.
        subagents: sub-agent policy.
        reasoning: reasoning policy.
        live_text: the run's watchers see each message's text (the web channel: its page is the chat).
        edits: the platform can edit a sent message; False: ``preview`` and ``progress`` (which grow one message
            by edits) run as ``block`` (:meth:`delivery_for`), the channel's setting and a run's ``mode`` alike.
        reasoning_opened: the model's messages start inside a reasoning block whose ``<think>`` was in the prompt
            (DeepSeek-R1 templates): its text is reasoning until ``</think>``.
        typing_every_s: seconds between typing indicators while a run shows nothing new (None: no typing
            indicator). Telegram's lasts <= 5 s, https://core.telegram.org/bots/api#sendchataction.
        exclusive_bot: the bot token is used by this sidecar alone, so every message the bot has in a chat is
            one the ledger knows or one whose send is uncertain: an uncertain Telegram send can then be settled by
            probing message ids (Telegram has no lookup by content).
        delta_replay_guard: a bare delta of at least 16 characters that begins with the whole text so far, itself
            at least 16 characters, is a replayed snapshot (DESIGN §4), applied as a snapshot; False takes every
            delta as new text.
        max_messages: the most chat messages one conversation of a run may become (None: no limit). Past it the
            answer is cut: its last allowed message ends with a short notice, the rest is not sent and the report
            says ``partial`` (:mod:`core.delivery.cap`). The service sets it per client.
        max_messages_setting: the setting ``max_messages`` comes from, named in the report's error
            (``clients.NAME.max_messages_per_run``).
        stop_button: a Stop control on the run's live message, where the adapter has
            :class:`~core.ports.StopControls` (:mod:`core.run.stop_controls`).
        approvers: platform user ids (``telegram:user:123``) who may decide an ``approval.request`` that names none
            (:mod:`core.run.approvals`).
        approvals_anyone: anyone in the chat may decide an ``approval.request`` that names nobody, where the channel
            names no ``approvers`` either (off: such a request is refused with a 400).
        approve_actions: the tool calls a person must approve before they reach the pipeline lane
            (:mod:`core.lanes.hold`): action classes (``irreversible``) and tool names; empty: none.
        approve_ttl_s: how long such a call waits for a person (seconds), then it is denied.
        max_retry_after_s: the longest 429 ``retry_after`` the channel's send chains obey, in seconds; a longer one
            is the platform refusing for now: the part is reported failed
            (:class:`~core.errors.RetryAfterTooLongError`), nothing pauses
            (:data:`~core.delivery.send_chain.MAX_RETRY_AFTER_S`).
        text_retention_s: how long after a run ended its text is kept, in seconds; then it is dropped from the ledger
            (ids, states and hashes stay: :meth:`core.run.relay.Relay.expire_texts`). None: kept until erased.
    """

    name: str
    delivery: DeliveryMode = DeliveryMode.PREVIEW
    max_units: int = 4096
    unit: LengthUnit = LengthUnit.UTF16
    render_limit: int | None = None
    fmt: TextFormat = TextFormat.PLAIN
    throttle_s: float = 1.0
    block_chunk: ChunkParams = field(
        default_factory=lambda: ChunkParams(min_chars=800, max_chars=4096, break_preference=BreakKind.PARAGRAPH)
    )
    coalesce: CoalesceParams = field(
        default_factory=lambda: CoalesceParams(min_chars=800, max_chars=4096, idle_ms=1000, joiner="\n\n")
    )
    subagents: SubagentPolicy = SubagentPolicy.HIDDEN
    reasoning: ReasoningPolicy = ReasoningPolicy.HIDDEN
    typing_every_s: float | None = None
    reasoning_opened: bool = False
    live_text: bool = False
    exclusive_bot: bool = False
    delta_replay_guard: bool = True
    max_messages: int | None = None
    max_messages_setting: str = "max_messages_per_run"
    stop_button: bool = False
    approvers: tuple[str, ...] = ()
    approvals_anyone: bool = False
    approve_actions: tuple[str, ...] = ()
    approve_ttl_s: float = 600.0
    edits: bool = True
    max_retry_after_s: float = MAX_RETRY_AFTER_S
    text_retention_s: float | None = None

    def delivery_for(self, mode: DeliveryMode) -> DeliveryMode:
        """The mode a run asking for ``mode`` runs with: ``block`` for ``preview``, ``progress`` and ``native`` where
        the platform cannot edit (``edits`` False: a native stream falls back to a preview, which edits), else
        ``mode`` (a fan-out place inherits its ``run.start``'s mode: a native Slack run's WhatsApp place)."""
        if not self.edits and mode in (DeliveryMode.PREVIEW, DeliveryMode.PROGRESS, DeliveryMode.NATIVE):
            return DeliveryMode.BLOCK
        return mode

    @property
    def rendered_max(self) -> int:
        """The most one message may measure once rendered (the adapter's ``measure`` is compared with it):
        ``render_limit``, or ``max_units`` when the platform counts what the chunker counts."""
        return self.max_units if self.render_limit is None else self.render_limit

    def split_params(self) -> ChunkParams:
        """Chunker parameters that fill messages up to the limit (preview rollover, final parts).

        Markdown is cut on its source with a 10% margin, since rendering can lengthen it (a ``---`` rule
        becomes a longer line); parts are then checked on their rendered length (:class:`Splitter`).
        """
        budget = self.max_units if self.fmt is not TextFormat.MARKDOWN else max(2, self.max_units * 9 // 10)
        return ChunkParams(
            min_chars=budget,
            max_chars=budget,
            break_preference=BreakKind.PARAGRAPH,
            unit=self.unit,
        )

    def block_params(self) -> ChunkParams:
        """Chunker parameters of ``block`` mode, capped at the platform limit, in the channel's unit."""
        max_units = min(self.block_chunk.max_chars, self.max_units)
        return ChunkParams(
            min_chars=min(self.block_chunk.min_chars, max_units),
            max_chars=max_units,
            break_preference=self.block_chunk.break_preference,
            unit=self.unit,
        )


MAX_THROTTLE_MS = 3_600_000
"""The longest ``throttle_ms`` a run may ask for (an hour; past it no preview would show, and a huge integer would
overflow the float of seconds)."""

OVERRIDABLE = (
    "throttle_ms",
    "format",
    "subagents",
    "reasoning",
    "reasoning_opened",
    "delta_replay_guard",
    "approve_actions",
)
"""Keys a ``run.start`` may override per run (``mode`` has its own field). ``approve_actions`` only adds to the
channel's: a run may ask a person for more of its calls, never for fewer."""


def apply_overrides(policy: ChannelPolicy, overrides: Mapping[str, JsonValue]) -> ChannelPolicy:
    """The policy with a run's ``overrides`` applied (one JSON object, as the ``run.start`` sent it).

    Raises:
        IngestError: an unknown key or a bad value (the message names it and the allowed ones).
    """
    for key, value in overrides.items():
        try:
            policy = _override(policy, key, value)
        except ValueError as exc:
            raise IngestError(f"bad override {key}={reprlib.repr(value)}: expected {exc}") from None
    return policy


def _override(policy: ChannelPolicy, key: str, value: JsonValue) -> ChannelPolicy:
    """``policy`` with the one override ``key`` set to ``value``.

    Raises:
        ValueError: a bad value (the message says what was expected). IngestError: an unknown key.
    """
    if key == "throttle_ms":
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_THROTTLE_MS:
            raise ValueError(f"a number of milliseconds from 0 to {MAX_THROTTLE_MS}")
        return replace(policy, throttle_s=value / 1000)
    if key == "format":
        if value not in ("plain", "markdown"):
            raise ValueError("plain or markdown")
        return replace(policy, fmt=TextFormat(value))
    if key == "subagents":
        return replace(policy, subagents=_member(SubagentPolicy, value))
    if key == "reasoning":
        return replace(policy, reasoning=_member(ReasoningPolicy, value))
    if key in ("reasoning_opened", "delta_replay_guard"):
        if not isinstance(value, bool):
            raise ValueError("true or false")
        if key == "reasoning_opened":
            return replace(policy, reasoning_opened=value)
        return replace(policy, delta_replay_guard=value)
    if key == "approve_actions":
        return replace(policy, approve_actions=_more_actions(policy, value))
    raise IngestError(f"unknown override {reprlib.repr(key)}: a run may override {', '.join(OVERRIDABLE)}")


MAX_APPROVE_ACTIONS = 50
"""The most entries ``approve_actions`` may hold (a channel's, a client's or a run's)."""


def _more_actions(policy: ChannelPolicy, value: JsonValue) -> tuple[str, ...]:
    """The channel's ``approve_actions`` and a run's ``value`` (a list of action classes and tool names) joined.

    Raises:
        ValueError: not such a list, or nobody may decide on this channel (no ``approvers``, no ``approvals_anyone``).
    """
    if not isinstance(value, list) or not all(isinstance(v, str) and 1 <= len(v) <= 200 for v in value):
        raise ValueError("a list of action classes (irreversible, compensable, ...) and tool names")
    if value and not policy.approvers and not policy.approvals_anyone:
        raise ValueError(
            f"a channel with approvers: channel {policy.name!r} names nobody who may decide (set its approvers, or "
            "approvals_anyone = true)"
        )
    names = [v for v in value if isinstance(v, str)]
    joined = tuple(dict.fromkeys((*policy.approve_actions, *names)))
    if len(joined) > MAX_APPROVE_ACTIONS:
        raise ValueError(f"at most {MAX_APPROVE_ACTIONS} action classes and tool names")
    return joined


_E = TypeVar("_E", bound=enum.StrEnum)


def _member(kind: type[_E], value: JsonValue) -> _E:
    """The member of ``kind`` named ``value``.

    Raises:
        ValueError: none is (the message is the enum's own).
    """
    if isinstance(value, str):
        return kind(value)
    raise ValueError(f"{value!r} is not a valid {kind.__qualname__}")


class Splitter:
    """Splits text into message parts that fit the platform once rendered.

    Cuts with the chunker on the source (:meth:`ChannelPolicy.split_params`), then measures each part as
    the platform will count it; a part still too long is cut again with a budget shrunk in proportion.
    Cost: linear in the text, plus one re-cut of the rare part that rendering made too long.
    """

    __slots__ = ("_measure", "_policy")

    def __init__(self, policy: ChannelPolicy, measure: Callable[[str, TextFormat], int]) -> None:
        self._policy = policy
        self._measure = measure

    def split(self, text: str) -> list[str]:
        """``text`` as message parts: its chunks (:meth:`ChannelPolicy.split_params`), each fitted (:meth:`fit`)."""
        return self.fitted(chunk_text(text, self._policy.split_params()))

    def fitted(self, chunks: list[str]) -> list[str]:
        """Chunks cut with :meth:`ChannelPolicy.split_params` (of a whole text, in order) as message parts: what
        :meth:`split` of that text gives."""
        return [fitted for part in chunks for fitted in self.fit(part)]

    def fit(self, part: str) -> list[str]:
        """``part`` as one or more parts that each fit once rendered."""
        limit = self._policy.rendered_max
        size = self._measure(part, self._policy.fmt)
        if size <= limit or len(part) < 2:
            return [part]
        budget = max(2, min(len(part) - 1, len(part) * limit // size - 8))
        params = replace(self._policy.split_params(), min_chars=budget, max_chars=budget)
        return [fitted for piece in chunk_text(part, params) for fitted in self.fit(piece)]

    def ending(self, part: str, notice: str) -> str:
        """``part`` cut short enough that ``notice`` fits after it (a blank line between) once rendered: the last
        message of an answer cut at the message limit. The cut is at the best break (paragraph > line > sentence >
        space), an open fence closed; only the notice is left when nothing of ``part`` fits with it."""
        fmt, limit = self._policy.fmt, self._policy.rendered_max
        head = part.rstrip()
        if not head.strip():
            return notice
        text = f"{head}\n\n{notice}"
        budget = min(self._policy.max_units, limit - self._measure(f"\n\n{notice}", fmt))  # the source's units
        if fmt is TextFormat.MARKDOWN:
            budget = budget * 9 // 10  # rendering can lengthen the source (see split_params)
        while self._measure(text, fmt) > limit:
            if budget < 2:
                return notice
            params = replace(self._policy.split_params(), min_chars=budget // 2, max_chars=budget)
            text = f"{chunk_text(head, params)[0].rstrip()}\n\n{notice}"
            budget = budget * 9 // 10
        return text
