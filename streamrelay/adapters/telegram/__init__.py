"""Telegram channel adapter (aiogram 3): :class:`TelegramAdapter`; the platform's registration: :data:`PLATFORM`.

The package imports aiogram only when :class:`TelegramAdapter` is used (about 4 s on a small machine): the registry
reads :data:`PLATFORM` without it.
"""

from typing import TYPE_CHECKING, Any

from streamrelay.adapters.telegram.platform import PLATFORM

if TYPE_CHECKING:
    from streamrelay.adapters.telegram.adapter import TelegramAdapter


def __getattr__(name: str) -> Any:
    if name == "TelegramAdapter":
        from streamrelay.adapters.telegram.adapter import TelegramAdapter

        return TelegramAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PLATFORM", "TelegramAdapter"]
