"""Errors of streamrelay, grouped by what the caller should do (shared/STYLE.md).

::

    StreamrelayError
      DeliveryError(platform, target)
        TransientDeliveryError        retried by the core's scheduler, never inside an adapter
          RateLimitedError(retry_after_s)
          PlatformUnavailableError    network, 5xx
        UncertainDeliveryError        timed out after sending: may have landed; never blindly retried
        PermanentDeliveryError        not retried; recorded with its cause
          TargetNotFoundError
          ForbiddenError
          PayloadRejectedError(reason: too_long | bad_format | empty | not_modified)
      ConfigError                     start-up only; names the key and the file
      IngestError                     bad input: a clear 4xx, nothing else in the run is lost
"""

from __future__ import annotations

import enum


class StreamrelayError(Exception):
    """Base of every error streamrelay raises on purpose."""


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


class RateLimitedError(TransientDeliveryError):
    """The platform answered 429. ``retry_after_s`` (float seconds) pauses the whole scope."""

    def __init__(self, message: str, *, retry_after_s: float, platform: str = "", target: str = "") -> None:
        super().__init__(message, platform=platform, target=target)
        self.retry_after_s = retry_after_s


class PlatformUnavailableError(TransientDeliveryError):
    """Network failure before the request was sent, or a 5xx answer."""


class UncertainDeliveryError(DeliveryError):
    """The call timed out after it was sent: it may have landed. Never blindly retried."""


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


class ConfigError(StreamrelayError):
    """Bad configuration at start-up. The message names the key and the file."""


class IngestError(StreamrelayError):
    """Bad input from the agent runtime. Becomes a 4xx; nothing else in the run is lost.

    Args:
        message: what was wrong and what to do.
        status: HTTP status to answer with (400 by default; 404 unknown run, 409 conflicts, 413 size).
    """

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.status = status
