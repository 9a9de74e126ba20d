"""Discord channel adapter (discord.py, REST only): :class:`DiscordAdapter`; the registration: :data:`PLATFORM`.

The package imports discord.py only when :class:`DiscordAdapter` (or a module that needs the SDK) is used: its
Markdown rewrite (:mod:`adapters.discord.markdown`) is read by the demo's checks and the chaos judge without it.
"""

from typing import TYPE_CHECKING, Any

from streamrelay.adapters.discord.platform import PLATFORM

if TYPE_CHECKING:
    from streamrelay.adapters.discord.adapter import DiscordAdapter


def __getattr__(name: str) -> Any:
    if name == "DiscordAdapter":
        from streamrelay.adapters.discord.adapter import DiscordAdapter

        return DiscordAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PLATFORM", "DiscordAdapter"]
