"""Microsoft Teams channel adapter (the Teams SDK for Python, ``microsoft-teams-api``): :class:`TeamsAdapter`; the
platform's registration: :data:`PLATFORM`.

The package imports the SDK only when :class:`TeamsAdapter` is used: the registry reads :data:`PLATFORM` without it.
"""

from typing import TYPE_CHECKING, Any

from streamrelay.adapters.teams.platform import PLATFORM

if TYPE_CHECKING:
    from streamrelay.adapters.teams.adapter import TeamsAdapter


def __getattr__(name: str) -> Any:
    if name == "TeamsAdapter":
        from streamrelay.adapters.teams.adapter import TeamsAdapter

        return TeamsAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PLATFORM", "TeamsAdapter"]
