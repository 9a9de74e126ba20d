"""Ports: the Protocols that adapters implement and core stages call.

Core never imports an adapter; the composition root (``app/``) wires implementations in.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem
from streamrelay.core.units import LengthUnit

if TYPE_CHECKING:
    from streamrelay.core.delivery.calls import Call, CallObserver, CallResult


class TextFormat(enum.StrEnum):
    """How an adapter must render text.

    ``plain``: send as is. ``markdown``: render Markdown for the platform. ``stripped``: Markdown with its
    markup removed (the fallback when the platform rejected the formatted message).
    """

    PLAIN = "plain"
    MARKDOWN = "markdown"
    STRIPPED = "stripped"


@dataclass(frozen=True, slots=True)
class MarkupPermissions:
    """What an agent's text may do on a channel besides being read, per channel (``allow_mentions``,
    ``allow_platform_links`` in its TOML table); both off by default: the adapters render mentions and the
    platform's own link syntax inert (docs/clients-security.md, "Text from agents").

    Attributes:
        mentions: mentions notify: Slack ``<!channel>``, ``<!here>``, ``<!everyone>``, ``<@U…>``, ``<#C…>``,
            ``<!subteam^…>``; Discord ``@everyone``, ``@here``, users and roles (``allowed_mentions``); Telegram
            ``tg://user?id=`` links.
        platform_links: the platform's own link forms: Slack ``<url|label>``; Telegram ``tg://`` links other than
            a user's. Markdown links to http(s) URLs are formatting and always shown; other schemes never are.
    """

    mentions: bool = False
    platform_links: bool = False


NO_MARKUP = MarkupPermissions()
"""Neither mentions nor platform links: every channel's default."""


class ChannelAdapter(Protocol):
    """One platform connection (one bot). All calls are single attempts: no retries inside.

    Every method raises a :class:`core.errors.DeliveryError` subclass on failure:
    ``RateLimitedError`` (429, with ``retry_after_s``), ``PlatformUnavailableError`` (not done: the request
    could not be sent, or a 5xx to a call that creates nothing), ``UncertainDeliveryError`` (unknown: a timeout
    or a reset after sending, or a 5xx to a create, which the platform may have stored), ``TargetNotFoundError``,
    ``ForbiddenError``, ``MessageFrozenError``, ``PayloadRejectedError`` (too long, bad format, empty).
    "message is not modified" is success, never an error.
    """

    platform: str
    """Platform name, e.g. ``telegram``."""
    observer: CallObserver | None
    """Watches every call :meth:`perform` makes (metrics and call logs; set by the composition root), or None."""
    max_units: int
    """The most one message may measure once rendered, in the unit of :meth:`measure` (``unit`` on most platforms;
    Matrix: bytes of the edit's JSON), :attr:`core.policy.ChannelPolicy.rendered_max`."""
    unit: LengthUnit

    async def perform(self, call: Call) -> CallResult:
        """The core's one entrance: perform ``call`` (a value of :mod:`core.delivery.calls`) in one attempt and
        answer with its outcome as a value: done, not done or unknown. Never raises a delivery error (a
        cancellation propagates). Adapters implement it as :func:`core.delivery.calls.perform_call` over the
        single-attempt methods below, which raise as documented here."""
        ...

    def measure(self, text: str, fmt: TextFormat) -> int:
        """The length the platform counts for ``text`` once rendered in ``fmt``, in ``unit`` or the platform's own
        count (Matrix: bytes of the edit's JSON), compared with :attr:`max_units`.

        Platform adapters also have a pure ``render(text, fmt)`` (the platform's payload for the text and its size in
        ``unit``) and keep the renderings of the texts in flight (a small bounded cache keyed by ``(text, fmt)``):
        this is the size of that rendering, and the send or edit of the same text uses it, so a part measured and
        then sent is rendered once. The core calls only ``measure``."""
        ...

    def check_target(self, target: Target) -> str | None:
        """What is wrong with ``target`` for this platform (e.g. a non-numeric reply id), or None."""
        ...

    def is_group(self, target: Target) -> bool:
        """True when ``target`` is a group conversation (stricter rate limits apply)."""
        ...

    async def send_text(self, target: Target, text: str, fmt: TextFormat, *, delivery_id: str | None = None) -> str:
        """Send a new message; return its platform message id (as a string).

        ``delivery_id`` (at most 25 ASCII characters) names this create for :meth:`settle_send`, where the platform
        can carry it: Discord sends it as the message ``nonce`` with ``enforce_nonce`` (a re-send with the same
        nonce returns the stored message, https://discord.com/developers/docs/resources/message#create-message);
        Slack as message ``metadata`` (``event_type`` ``streamrelay_delivery``, ``event_payload.delivery_id``,
        https://docs.slack.dev/messaging/message-metadata); Telegram cannot carry it.
        """
        ...

    async def send_media(
        self, target: Target, media: MediaItem, fmt: TextFormat, *, delivery_id: str | None = None
    ) -> str:
        """Send one media item as a message of its own; return its platform message id (as a string).

        The caption is rendered in ``fmt`` like a text. ``delivery_id`` as in :meth:`send_text`; an uncertain media
        create is settled by :meth:`settle_send` with ``pending.media`` set. Per platform:

        - Telegram: sendPhoto / sendDocument / sendAudio / sendVideo by URL with ``caption`` (0-1024 characters after
          entity parsing), https://core.telegram.org/bots/api#sendphoto.
        - Slack: chat.postMessage with an image block (``image_url``, ``alt_text``) for an image, a section block
          with a mrkdwn link ``<url|caption>`` for the others, and ``text`` as the notification fallback,
          https://docs.slack.dev/reference/block-kit/blocks/image-block.
        - Discord: a message with one embed whose ``image.url`` is the image (``title`` the caption), a link message
          for the others, https://discord.com/developers/docs/resources/message#embed-object.
        - Web (the live page): a part of its own (a link with the caption; the page's CSP shows no outside image).

        Raises:
            core.errors.DeliveryError: a subclass, like :meth:`send_text` (``PayloadRejectedError`` for a caption
                or URL the platform refuses).
        """
        ...

    async def settle_send(self, target: Target, pending: PendingSend) -> Settlement:
        """Find out whether a create whose outcome is unknown (timed out, 5xx, reset, a kill with the call in
        flight) stored a message, by asking the platform where that is safe. One attempt (no retries inside).

        - Discord: the same create again with the same nonce and ``enforce_nonce``: the stored message comes back,
          or the message is created now; either way exactly one exists: ``found``.
        - Slack: conversations.history (conversations.replies in a thread) with ``include_all_metadata``, looking
          for ``pending.delivery_id`` among the messages since ``pending.after_id``: ``found`` or ``not_sent``.
        - Telegram, only when ``pending.exclusive`` (the bot token is the sidecar's alone): message ids after
          ``pending.after_id`` (skipping ``pending.known_ids``) are probed with editMessageText of
          ``pending.text``; "message is not modified" proves the message is ours (``found``), "message to edit not
          found" that no later message exists (``not_sent``), "message can't be edited" is someone else's (next
          id). Without ``exclusive``, or past :data:`PROBE_LIMIT` ids: ``unknown``. A media create
          (``pending.media``) is probed with editMessageCaption of its caption.

        Discord and Slack settle a media create like a text (the nonce with the same embed; the metadata). The core
        never sends a media create again on ``unknown``: it reports it uncertain.

        Raises:
            core.errors.DeliveryError: a subclass, like every call (429, 5xx: the core asks again later).
        """
        ...

    async def edit_text(self, target: Target, message_id: str, text: str, fmt: TextFormat) -> bool:
        """Replace the text of a message this bot sent.

        Returns:
            True when the message changed; False when the platform said it was not modified (success).
        """
        ...

    async def delete_message(self, target: Target, message_id: str) -> None:
        """Delete a message this bot sent."""
        ...

    async def send_typing(self, target: Target) -> None:
        """Show a typing indicator (Telegram: lasts <= 5 s)."""
        ...

    async def clear_typing(self, target: Target) -> None:
        """Take down a typing indicator that would outlive the run (called once at the end of a run that showed
        one). Platforms whose indicator expires by itself within seconds do nothing."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


PROBE_LIMIT = 20
"""At most this many message ids are probed to settle one uncertain Telegram send."""

STREAM_START_MARK = "ss"
"""How the delivery id of a native stream start's :class:`PendingSend` begins (a create's begins ``sr``): no
platform call carries it; it names the start in the ledger and tells a settle what to look for."""


@dataclass(frozen=True)
class PendingSend:
    """A create whose outcome is unknown, as :meth:`ChannelAdapter.settle_send` needs it.

    Attributes:
        delivery_id: the id the create carried (Discord nonce, Slack metadata), at most 25 characters.
        text: the text it sent.
        fmt: how it was rendered.
        after_id: the newest message id the sidecar knew in this conversation when the create was made (None:
            none known); the stored message, if any, is newer.
        known_ids: ids newer than ``after_id`` that are known to be other messages of the sidecar (never probed).
        exclusive: the bot token is used by this sidecar alone (``exclusive_bot``).
        before_id: a message id acknowledged *after* this create was answered (the part sent again): the stored
            message, if any, is older. Given after a settle answered ``needs_bound``.
        media: the media item when the create was :meth:`ChannelAdapter.send_media` (then ``text`` is
            :meth:`MediaItem.text`); None for a text.
    """

    delivery_id: str
    text: str
    fmt: TextFormat
    after_id: str | None = None
    known_ids: frozenset[str] = frozenset()
    exclusive: bool = False
    before_id: str | None = None
    media: MediaItem | None = None

    @property
    def stream_start(self) -> bool:
        """True for a native stream start (:meth:`NativeStreaming.stream_start`), which carries no delivery id: a
        platform that can settle it (:attr:`NativeStreaming.settles_start`) looks for a message of the bot between
        ``after_id`` and ``before_id`` that carries no delivery id and shows ``text``."""
        return self.delivery_id.startswith(STREAM_START_MARK)


class SettleOutcome(enum.StrEnum):
    FOUND = "found"
    """The message is stored: ``message_id`` names it."""
    NOT_SENT = "not_sent"
    """No message was stored: the create may be made again."""
    UNKNOWN = "unknown"
    """The platform cannot tell (Telegram with a shared bot token): a duplicate is possible."""
    NEEDS_BOUND = "needs_bound"
    """The platform can tell only between two known messages (Telegram private chats and basic groups, whose ids
    come from one counter per bot): the core sends the part again, then settles this create again with the new
    message's id as ``before_id``; if the old message is found, the new one is deleted."""


@dataclass(frozen=True)
class Settlement:
    """What :meth:`ChannelAdapter.settle_send` found out: ``outcome`` and, when ``found``, the ``message_id``."""

    outcome: SettleOutcome
    message_id: str | None = None


class CallKind(enum.StrEnum):
    """The kinds of platform call a rate budget can apply to (``calls = [...]`` in a budget's TOML)."""

    SEND = "send"
    EDIT = "edit"
    DELETE = "delete"
    TYPING = "typing"
    STREAM_START = "stream_start"
    """Open a native stream (Slack chat.startStream, Tier 2; Telegram sendMessageDraft)."""
    STREAM_UPDATE = "stream_update"
    """Grow a native stream (Slack chat.appendStream, Tier 4; Telegram sendMessageDraft)."""
    STREAM_FINISH = "stream_finish"
    """Persist a native stream (Slack chat.stopStream, Tier 2; Telegram sendMessage)."""


@runtime_checkable
class NativeStreaming(Protocol):
    """The platform's own streaming preview, optional: an adapter that has it implements this too.

    A native slot is one answer part whose intermediate states go through the platform's stream and whose
    final state is persisted by :meth:`stream_finish`. Two shapes exist:

    - append (Slack https://docs.slack.dev/reference/methods/chat.startStream): ``stream_start`` posts
      the streamed message (its ``ts`` is the handle), ``stream_update`` appends the new suffix, and
      ``stream_finish`` stops the stream; a text that no longer extends what was streamed, or a stream that
      expired, is finished with chat.update on the same ``ts`` (never lost).
    - replace (Telegram https://core.telegram.org/bots/api#sendmessagedraft): the handle is a draft id;
      every update sends the whole text (a draft lives about 30 s: updates refresh it); ``stream_finish``
      sends the text with sendMessage, whose message id is returned.

    Each call is one attempt and raises :class:`core.errors.DeliveryError` subclasses like
    :class:`ChannelAdapter`. ``NativeUnavailableError`` means the platform refused streaming here: the core
    falls back to ``preview`` for the rest of the run.
    """

    stream_refresh_s: float | None
    """Seconds after which an unchanged stream must be shown again to stay alive (Telegram: a draft lives about
    30 s, https://core.telegram.org/bots/api#sendmessagedraft), or None."""

    finish_creates: bool
    """:meth:`stream_finish` creates the message (Telegram: sendMessage after the drafts, so an unknown finish is
    settled like any create), rather than persisting the streamed one (Slack: chat.stopStream of the stream's ts)."""

    finish_repeats: bool
    """A finish that is not a create (:attr:`finish_creates` False) and whose outcome is unknown may be sent again:
    the platform refuses a second final on a stream it completed, and the adapter answers that refusal as done (the
    stream shows the final it had been sent). Teams: 403 ``ContentStreamNotAllowed`` "Content stream is not allowed
    on an already completed streamed message"
    (https://learn.microsoft.com/en-us/microsoftteams/platform/bots/streaming-ux#error-codes). False: an unknown
    finish is reported uncertain, never sent again (Slack turns its own unknown stop into an edit of the whole text
    before the core sees it)."""

    settles_start: bool
    """A stream start whose outcome is unknown can be settled (:meth:`ChannelAdapter.settle_send` with a
    :attr:`PendingSend.stream_start` pending, bounded by the message the part went on in): Slack reads the thread
    back (conversations.replies). False: an opened stream's first words are reported uncertain (Telegram: a draft
    lapses by itself, nothing to settle)."""

    def native_refusal(self, target: Target) -> str | None:
        """Why native streaming cannot be used for ``target`` (a group chat, no thread), or None."""
        ...

    async def stream_start(self, target: Target, text: str, fmt: TextFormat) -> str:
        """Open a stream showing ``text``; return its handle (Slack: the message ts; Telegram: draft id)."""
        ...

    async def stream_update(self, target: Target, handle: str, shown: str, text: str, fmt: TextFormat) -> None:
        """Make the stream show ``text`` (``shown`` is what it shows now, as acknowledged)."""
        ...

    async def stream_finish(self, target: Target, handle: str, shown: str, text: str, fmt: TextFormat) -> str:
        """End the stream with ``text`` persisted; return the permanent message id."""
        ...

    async def stream_cancel(self, target: Target, handle: str) -> None:
        """Abandon a stream whose part is no longer wanted (a replace emptied it). Slack: delete the streamed
        message; Telegram: nothing to do (an unsent draft lapses by itself)."""
        ...


@runtime_checkable
class PooledConnections(Protocol):
    """An adapter whose calls share a pool of HTTP connections, optional: at most :attr:`connections` of them are
    on the wire at once, the others wait for one. The core then lets at most that many of the channel's calls be under
    way at once (:class:`~core.delivery.call_slots.CallSlots`): the others wait before their text and request are
    built, not inside the SDK with them (memory: issue 23)."""

    connections: int
    """The most HTTP connections the adapter's session opens at once (at least 1)."""


@runtime_checkable
class StreamStatus(Protocol):
    """Status lines shown on a native stream, optional: an adapter whose platform shows a progress line in its
    stream (Teams' *informative* updates, https://learn.microsoft.com/en-us/microsoftteams/platform/bots/streaming-ux:
    a ``typing`` activity with ``streamType`` ``informative``, at most 1,000 characters, before and between the
    streaming chunks) implements this as well as :class:`NativeStreaming`.

    The delivery machine calls it only while the run streams natively and its answer's stream is open or about to
    open (no answer part yet), with the run's latest status (a phase, a ``status`` event, a tool starting, a
    sub-agent's line). A status line is cosmetic: every outcome but done drops it (a 429 waits and sends the latest
    line later), it is never in the ledger and never sent after the run's final.
    """

    status_chars: int
    """The most characters one status line may have (Teams: 1,000); the core cuts a longer line with an ellipsis."""

    async def stream_status(self, target: Target, text: str) -> None:
        """Show ``text`` as the status line of the stream open for ``target``, opening one with it when none is
        (the answer's :meth:`NativeStreaming.stream_start` then goes on in that stream)."""
        ...

    async def stream_status_end(self, target: Target) -> None:
        """At the run's end: a stream that only ever showed status lines (its answer went as a message, or there
        was none) is taken down, so no progress line outlives the run and the chat's next stream may open."""
        ...


@runtime_checkable
class Threads(Protocol):
    """Side conversations anchored at a message, optional: an adapter whose platform has threads implements
    this, so ``subagents = "thread"`` can show each sub-agent's preview in its own thread.

    - Slack: a thread under the anchor message (``thread_ts`` = the anchor's ts; no call is made).
      https://docs.slack.dev/messaging/#threading
    - Telegram: a reply chain: the child's messages reply to the anchor message (no call is made; forum
      topics are not created). https://core.telegram.org/bots/api#replyparameters
    - Discord: a public thread started from the anchor message (``POST /channels/{id}/messages/{mid}/threads``,
      thread names are 1-100 characters).
      https://discord.com/developers/docs/resources/channel#start-thread-from-message
    """

    def thread_refusal(self, target: Target) -> str | None:
        """Why no thread can be opened under a message of ``target`` (e.g. it already is a thread), or None."""
        ...

    async def open_thread(self, target: Target, anchor_message_id: str, title: str) -> Target:
        """Open a side conversation under message ``anchor_message_id`` of ``target``; return the target its
        messages go to. ``title`` names it where the platform shows names (trimmed to the platform's limit).

        Raises:
            core.errors.DeliveryError: a subclass, like every adapter call (one attempt, no retries).
        """
        ...


@dataclass(frozen=True)
class StopControl:
    """The Stop control a run's live message carries (:mod:`core.run.stop_controls`).

    Attributes:
        control_id: names the run without revealing it: ``stop:`` and 16 hex characters of a hash of the run's key
            (21 bytes: inside Telegram's ``callback_data`` 1-64 bytes, Slack's ``action_id`` 255 and Discord's
            ``custom_id`` 100). The bot forwards a click as ``POST /v1/runs/{the 16 hex}/stop``.
        label: the button's text (Slack: at most 75 characters).
    """

    control_id: str
    label: str = "⏹ Stop"
    more: tuple[tuple[str, str], ...] = ()
    """Further buttons on the same row, each ``(control id, label)``: an approval's Deny after its Approve
    (:mod:`core.run.approvals`). A Stop control has none."""

    def buttons(self) -> tuple[tuple[str, str], ...]:
        """Every button of the control, in order, as ``(control id, label)``."""
        return ((self.control_id, self.label), *self.more)


class Shown(enum.StrEnum):
    """What the platform shows of a delivered message when it is read back (:class:`ReadBack`).

    ``as_delivered``: the message is there with the text the ledger says was acknowledged. ``changed``: it is there
    with another text (edited by someone else, or moderated). ``gone``: the platform has no such message any more
    (deleted by a person or a moderator, or its conversation is gone).
    """

    AS_DELIVERED = "as_delivered"
    CHANGED = "changed"
    GONE = "gone"


@runtime_checkable
class ReadBack(Protocol):
    """Reading a delivered message back from the platform, optional: an adapter whose platform lets a bot read a
    message by its id implements this, so an audit can tell a message deleted or edited after delivery
    (:mod:`core.run.audit`).

    - Slack: conversations.history (conversations.replies in a thread) with ``oldest`` = ``latest`` = the message's
      ts, ``inclusive`` (https://docs.slack.dev/reference/methods/conversations.history,
      https://docs.slack.dev/reference/methods/conversations.replies); a deleted message is not returned.
    - Discord: Get Channel Message (https://discord.com/developers/docs/resources/message#get-channel-message).
    - Matrix: GET /rooms/{roomId}/event/{eventId}; a redacted event is gone
      (https://spec.matrix.org/v1.11/client-server-api/#get_matrixclientv3roomsroomideventeventid).
    - Teams: Microsoft Graph's Get chatMessage (https://learn.microsoft.com/en-us/graph/api/chatmessage-get), only
      where Graph is configured (``settle_with_graph``): :meth:`unreadable` says why not otherwise.
    - WhatsApp: none. The Cloud API sends messages and reports their statuses by webhook; it has no call that reads
      a sent message (https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages).
    - Telegram: none. The Bot API has no method that reads a message by id (https://core.telegram.org/bots/api),
      and the methods that would touch one (forwardMessage, copyMessage) post a message: a Telegram channel is
      reported as not readable.
    """

    def unreadable(self) -> str | None:
        """Why this adapter cannot read messages back as configured (an audit reports ``readable: false`` with it and
        makes no call), or None: it can."""
        ...

    async def read_back(self, target: Target, message_id: str, shown: str, fmt: TextFormat) -> Shown:
        """Whether message ``message_id`` of ``target`` still shows ``shown`` (the text the ledger acknowledged, as
        the adapter renders it in ``fmt``), compared whitespace-insensitively.

        Raises:
            core.errors.DeliveryError: a subclass, like every adapter call (a 429, an outage, no permission to read).
        """
        ...


@runtime_checkable
class StopControls(Protocol):
    """A Stop button on a message, optional: an adapter that can show one implements this.

    - Telegram: an inline keyboard with one button whose ``callback_data`` is the control id
      (https://core.telegram.org/bots/api#inlinekeyboardbutton; a click arrives to the bot as a ``callback_query``
      it answers with answerCallbackQuery). editMessageReplyMarkup puts it on or takes it off.
    - Slack: an ``actions`` block with one button (``action_id`` the control id, ``value`` the same) after the text
      in a ``markdown`` block (https://docs.slack.dev/reference/block-kit/blocks/actions-block); chat.update puts it
      on or takes it off (with the text again: Slack replaces the message's blocks).
    - Discord: an action row with one button component (``custom_id`` the control id,
      https://discord.com/developers/docs/components/reference#button); PATCH of the message's ``components``.

    While a message carries a control the adapter's own edits of it keep it (an editMessageText without
    ``reply_markup`` would take Telegram's inline keyboard away; a chat.update without ``blocks`` Slack's).
    """

    async def set_stop(
        self, target: Target, message_id: str, text: str, fmt: TextFormat, control: StopControl | None
    ) -> None:
        """Put ``control`` on message ``message_id`` (now showing ``text`` in ``fmt``), or take it off (None).
        One attempt, no retries; "not modified" is success.

        Raises:
            core.errors.DeliveryError: a subclass, like every adapter call.
        """
        ...


@runtime_checkable
class DraftStopControls(Protocol):
    """A stop button on a natively streamed draft, optional (Telegram Bot API 10.3: sendMessageDraft ``can_stop``;
    a press reaches the bot as a ``stopped_message_generation`` update naming the chat and the ``draft_id``,
    https://core.telegram.org/bots/api#sendmessagedraft). The bot forwards it as
    ``POST /v1/runs/draft:<chat_id>:<draft_id>/stop`` (:func:`core.run.stop_controls.draft_control_id`)."""

    def stoppable_draft(self, target: Target, handle: str, stoppable: bool) -> None:
        """From now on the updates of draft ``handle`` of ``target`` show the stop button (``stoppable``), or no
        longer (False: the draft ended). No call is made here: the next update carries it."""
        ...
