"""The pieces the platform adapters' error tables are made of: factories ``(message, target, original) ->
DeliveryError`` that tag the error with the platform. Shared by the Telegram, Slack and Discord adapters, which
each map their platform's refusals (codes, descriptions, statuses) to these.
"""

from __future__ import annotations

from collections.abc import Callable

from core.errors import DeliveryError, PayloadRejectedError, RejectReason

ErrorFactory = Callable[[str, str, BaseException], DeliveryError]
"""``(message, target, original) -> error``."""


def plain_error(platform: str, cls: type[DeliveryError]) -> ErrorFactory:
    """A factory of ``cls`` errors for ``platform``."""

    def make(message: str, target: str, _original: BaseException) -> DeliveryError:
        return cls(message, platform=platform, target=target)

    return make


def rejected_error(platform: str, reason: RejectReason) -> ErrorFactory:
    """A factory of :class:`PayloadRejectedError` with ``reason`` for ``platform``."""

    def make(message: str, target: str, _original: BaseException) -> DeliveryError:
        return PayloadRejectedError(message, reason=reason, platform=platform, target=target)

    return make
