"""Errors of streamrelay, grouped by what the caller should do (shared/STYLE.md).

::

    StreamrelayError
      DeliveryError(platform, target)
        TransientDeliveryError        retried by the core's scheduler, never inside an adapter
          RateLimitedError(retry_after_s, scope)
          PlatformUnavailableError    not done: not sent, or a 5xx to an edit or delete
        UncertainDeliveryError        unknown (timeout, reset, 5xx to a create): a create is settled, not resent
          AnswerTimeoutError          sent whole, no answer within the send timeout
          UnreadableAnswerError(status, excerpt)  an answer the adapter cannot read (no result, empty, HTML)
        PermanentDeliveryError        not retried; recorded with its cause
          TargetNotFoundError
          ForbiddenError
          PayloadRejectedError(reason: too_long | bad_format | empty | not_modified)
          NativeUnavailableError      the platform's own streaming is refused here: fall back to preview
          MessageFrozenError          the message exists but can no longer be edited: it keeps what it shows
          RetryAfterTooLongError(retry_after_s, max_s)  a 429 asking for a longer wait than the channel obeys
      ConfigError                     start-up only; names the key and the file
      IngestError                     bad input: a clear 4xx, nothing else in the run is lost
"""

from __future__ import annotations

import enum


class StreamrelayError(Exception):
    """Base of every error streamrelay raises on purpose."""


class OwnershipLostError(StreamrelayError):
    """This process no longer owns the run (replicas: its partition's lease went to another replica, and a write
    with the old fencing token was refused). It must stop at once and call nothing more: the new owner resumes
    the run from the journal, and settles what was in flight."""


class StoreUnavailableError(OwnershipLostError):
    """The shared store (replicas: Redis) did not answer a write or a rate-budget request. Handled as lost ownership:
    the run stops where it is, finalizes nothing and sends nothing more, and its partition's owner resumes it from
    the journal once the store answers again (a run never fails for a store outage)."""


class DeliveryError(StreamrelayError):
    """A platform call failed.

    Args:
        message: what happened, for people.
        platform: e.g. ``telegram``.
        target: the chat / channel id the call was for (never a token).
    """

    def __init__(self, message: str, *, platform: str = "", target: str = "") -> None:
        super().__init__(message)
        self.platform = platform
        self.target = target


class TransientDeliveryError(DeliveryError):
    """Worth retrying later; the core's scheduler decides when."""


class RateScope(enum.StrEnum):
    """What a 429 pauses.

    ``conversation``: this chat or channel (Telegram flood control, Slack chat.postMessage per channel).
    ``method``: this kind of call bot-wide (Slack chat.update is Tier 3 per workspace:
    https://docs.slack.dev/reference/methods/chat.update). ``bot``: every call of the bot (Discord's global
    limit, a 429 with ``"global": true``: https://discord.com/developers/docs/topics/rate-limits).
    """

    CONVERSATION = "conversation"
    METHOD = "method"
    BOT = "bot"


class RateLimitedError(TransientDeliveryError):
    """The platform answered 429. ``retry_after_s`` (float seconds) pauses ``scope``."""

    def __init__(
        self,
        message: str,
        *,
        retry_after_s: float,
        scope: RateScope = RateScope.CONVERSATION,
        platform: str = "",
        target: str = "",
    ) -> None:
        super().__init__(message, platform=platform, target=target)
        self.retry_after_s = retry_after_s
        self.scope = scope


class PlatformUnavailableError(TransientDeliveryError):
    """Not done: the request could not be sent, or a 5xx answered a call that creates nothing (an edit, a delete).
    A 5xx to a create is an :class:`UncertainDeliveryError`: the platform may have stored the message."""


class UncertainDeliveryError(DeliveryError):
    """Unknown: the call was sent and no answer says what became of it (a timeout, a reset, a 5xx to a create): it
    may have landed. A create is settled with the platform, never blindly retried; an edit is retried."""


class AnswerTimeoutError(UncertainDeliveryError):
    """Unknown, after a request that was sent whole and got no answer within the send timeout: the platform was
    reached and, most often, is still processing or has stored it (unlike a 5xx from a proxy or a reset)."""


class UnreadableAnswerError(UncertainDeliveryError):
    """Unknown: the platform (or something in front of it) answered, but not in a shape the adapter can read: a
    200 without the result (Telegram ``{"ok": true}`` alone), an empty or HTML body, a message without its id. The
    call may have been done: a create is settled like a timeout (or reported uncertain), never blindly resent; an
    edit, a delete, typing and a Stop move are retried (they are idempotent). Never an SDK's decode error.

    Args:
        message: ``<platform> <method>: ...`` with what was wrong, token-free.
        status: the answer's HTTP status, or None when it is not known.
        excerpt: the start of the answer's body, short and token-free (for people; ``""``: an empty body).
    """

    def __init__(
        self, message: str, *, status: int | None = None, excerpt: str = "", platform: str = "", target: str = ""
    ) -> None:
        super().__init__(message, platform=platform, target=target)
        self.status = status
        self.excerpt = excerpt

    @property
    def accepted(self) -> bool:
        """The answer's status was 2xx: the platform took the call and most often did it (a create is most often
        stored, as after an :class:`AnswerTimeoutError`), though what it answered cannot be read."""
        return self.status is not None and 200 <= self.status < 300


class PermanentDeliveryError(DeliveryError):
    """Retrying cannot help; recorded with its cause."""


class TargetNotFoundError(PermanentDeliveryError):
    """The chat or the message to edit does not exist (any more)."""


class ForbiddenError(PermanentDeliveryError):
    """The bot may not write there (blocked, kicked, no rights)."""


class RejectReason(enum.StrEnum):
    TOO_LONG = "too_long"
    BAD_FORMAT = "bad_format"
    EMPTY = "empty"
    NOT_MODIFIED = "not_modified"
    OTHER = "other"


class PayloadRejectedError(PermanentDeliveryError):
    """The platform refused the content itself. ``reason`` says why."""

    def __init__(self, message: str, *, reason: RejectReason, platform: str = "", target: str = "") -> None:
        super().__init__(message, platform=platform, target=target)
        self.reason = reason


class NativeUnavailableError(PermanentDeliveryError):
    """The platform refused its own streaming here (a group chat, no thread, a method not enabled for
    the app): the core falls back to ``preview`` for the rest of the run."""


class MessageFrozenError(PermanentDeliveryError):
    """The message exists and shows what was last acknowledged, but the platform accepts no more edits of it
    (Telegram "message can't be edited", https://core.telegram.org/bots/api#editmessagetext; Slack
    ``cant_update_message`` / ``edit_window_closed``, https://docs.slack.dev/reference/methods/chat.update#errors).
    The core keeps that message as it is and continues the rest of its text in a new one."""


class RetryAfterTooLongError(PermanentDeliveryError):
    """The platform answered 429 with a ``retry_after`` longer than the channel obeys (``max_retry_after_s``): taken
    as the platform refusing the call for now. The send chain makes it of the :class:`RateLimitedError` (and pauses
    nothing: the rest of the conversation goes on); the call's part is reported failed with this reason (on the desk
    once the run ended, to resend later), never waited for: a Matrix ``retry_after_ms`` of 10^9 would else hold the
    conversation 11.5 days with its run pending and no error.

    Attributes:
        retry_after_s: the wait the platform asked for (float seconds).
        max_s: the longest wait the channel obeys (``channels.NAME.max_retry_after_s``, float seconds).
        scope: what the 429 paused (:class:`RateScope`).
    """

    def __init__(self, limited: RateLimitedError, max_s: float) -> None:
        super().__init__(
            f"{limited} (429: the platform asked to wait {limited.retry_after_s:g} s, longer than this channel's"
            f" max_retry_after_s = {max_s:g} s: refused for now, not delivered; resend it from the desk later)",
            platform=limited.platform,
            target=limited.target,
        )
        self.retry_after_s = limited.retry_after_s
        self.max_s = max_s
        self.scope = limited.scope


class ConfigError(StreamrelayError):
    """Bad configuration at start-up. The message names the key and the file."""


class IngestError(StreamrelayError):
    """Bad input from the agent runtime. Becomes a 4xx; nothing else in the run is lost.

    Args:
        message: what was wrong and what to do.
        status: HTTP status to answer with (400 by default; 404 unknown run, 409 conflicts, 413 size, 422 a limit
            of the run, 429 a limit of the client).
        retry_after_s: seconds after which the same line may be taken (a 429's ``Retry-After``), or None.
    """

    def __init__(self, message: str, *, status: int = 400, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s
