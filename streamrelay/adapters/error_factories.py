"""What the platform adapters' errors are made of, shared by the Telegram, Slack and Discord adapters: factories
``(message, target, original) -> DeliveryError`` that tag an error with its platform (each adapter maps its
platform's refusals, codes and statuses to these), and the :class:`Scrubber` that keeps the bot token out of
every message.
"""

from __future__ import annotations

from collections.abc import Callable

from streamrelay.core.errors import DeliveryError, PayloadRejectedError, RejectReason

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


class Scrubber:
    """Removes a bot token, and its secret part, from text bound for an error, a log or a repr.

    Args:
        token: the whole token; becomes ``<token>``.
        parts: parts of it that may appear alone (the secret after the bot id); each becomes ``<token>``,
            unless it is shorter than 8 characters (replacing so short a string would garble any text).
    """

    def __init__(self, token: str, *parts: str) -> None:
        self._secrets = (token, *(p for p in parts if len(p) >= 8))

    def __repr__(self) -> str:
        return "Scrubber()"

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "<token>")
        return text
