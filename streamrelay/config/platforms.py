"""What streamrelay knows of each platform: text limits and default rate budgets, each with its source.

The facts live with each platform (``adapters/<name>/platform.py``, listed by :mod:`adapters.registry`); this is
the settings' view of them. A channel's ``limit`` may lower the platform's text limit, never raise it; its
``[rate.NAME]`` tables override these budgets field by field (same name) or add new ones. ../shared/PLATFORMS.md
lists the facts.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from streamrelay.adapters.platform import PlatformSpec, SourcedBudget
from streamrelay.adapters.registry import REGISTRY

PLATFORMS: dict[str, PlatformSpec] = {name: platform.spec for name, platform in REGISTRY.items()}
"""The platforms channels can be configured for: their delivery facts by name."""

PLATFORM_NAMES: tuple[str, ...] = tuple(REGISTRY)
"""The ``platform`` values a channel may have, in registration order."""

NATIVE_PLATFORMS: tuple[str, ...] = tuple(name for name, spec in PLATFORMS.items() if spec.native)
"""The platforms that stream by themselves (``delivery = "native"``)."""

TOKEN_PLATFORMS: tuple[str, ...] = tuple(name for name, platform in REGISTRY.items() if platform.needs_token)
"""The platforms whose channels need a bot token from the environment (``token_env``)."""


def _registered(name: str) -> str:
    """``name`` when a platform of that name is registered (:mod:`adapters.registry`).

    Raises:
        PydanticCustomError: naming the registered ones, worded as a ``Literal`` of them would be.
    """
    if name not in REGISTRY:
        known = ", ".join(repr(n) for n in PLATFORM_NAMES[:-1]) + f" or {PLATFORM_NAMES[-1]!r}"
        raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": known})
    return name


PlatformName = Annotated[str, AfterValidator(_registered), Field(json_schema_extra={"enum": list(PLATFORM_NAMES)})]
"""A channel's ``platform`` value: the name of a registered platform (else: an error naming the registered ones)."""

__all__ = [
    "NATIVE_PLATFORMS",
    "PLATFORMS",
    "PLATFORM_NAMES",
    "TOKEN_PLATFORMS",
    "PlatformName",
    "PlatformSpec",
    "SourcedBudget",
]
