"""The tables inside a channel's settings: ``chunk``, ``coalesce`` and each ``rate.BUDGET`` (config/channels.toml).

Kept apart from :mod:`config.settings` (the channel, service and whole-file settings) to keep each module small.
"""

from __future__ import annotations

from types import NoneType, UnionType
from typing import Any, ClassVar, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, model_validator

from streamrelay.config.platforms import SourcedBudget
from streamrelay.core.budgets.rate import MESSAGE_CALLS, Budget, BudgetScope
from streamrelay.core.chunking import BreakKind
from streamrelay.core.ports import CallKind


def _is_number(annotation: object) -> bool:
    """``int``, ``float`` or an optional one (``float | None``)."""
    if annotation in (int, float):
        return True
    if get_origin(annotation) in (Union, UnionType):
        kinds = set(get_args(annotation)) - {NoneType}
        return bool(kinds) and kinds <= {int, float}
    return False


class Strict(BaseModel):
    """A settings table: an unknown key is an error naming it, and a number key given a TOML boolean
    (``max_retry_after_s = true``) is an error naming it: pydantic's lax mode would read ``true`` as 1, a guess at
    what the operator meant (full strict mode is not used: the environment overrides arrive as strings). Errors never
    echo the input (pydantic's ``input_value``): a table may hold a secret (``redis_url``'s password), and a model
    validator's input is the whole table."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)
    _number_keys: ClassVar[dict[type, frozenset[str]]] = {}

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_numbers(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        keys = Strict._number_keys.get(cls)
        if keys is None:
            keys = frozenset(name for name, field in cls.model_fields.items() if _is_number(field.annotation))
            Strict._number_keys[cls] = keys
        for key in keys & data.keys():
            if isinstance(data[key], bool):
                word = "true" if data[key] else "false"
                raise ValueError(f"{key} must be a number, not the boolean {word}: write the number itself")
        return data


class ChunkSettings(Strict):
    min_chars: int = Field(default=800, ge=1)
    max_chars: int = Field(default=4096, ge=1)
    break_preference: BreakKind = BreakKind.PARAGRAPH

    @model_validator(mode="after")
    def _min_within_max(self) -> ChunkSettings:
        if self.min_chars > self.max_chars:
            raise ValueError(f"min_chars ({self.min_chars}) must not exceed max_chars ({self.max_chars})")
        return self


class CoalesceSettings(Strict):
    min_chars: int = Field(default=800, ge=0)
    max_chars: int = Field(default=4096, ge=1)
    idle_ms: int = Field(default=1000, ge=0)
    joiner: str = "\n\n"

    @model_validator(mode="after")
    def _min_within_max(self) -> CoalesceSettings:
        if self.min_chars > self.max_chars:
            raise ValueError(f"min_chars ({self.min_chars}) must not exceed max_chars ({self.max_chars})")
        return self


class BudgetSettings(Strict):
    """One ``[channels.NAME.rate.BUDGET]`` table: a rate budget and the documentation URL of its numbers.

    A table named like one of the platform's default budgets (config/platforms.py) overrides only the
    fields it gives; a new name must give ``scope``, a rate (``per_s`` or ``per_min``) and ``source``.
    """

    scope: BudgetScope | None = None
    per_s: float | None = Field(default=None, ge=0)
    per_min: float | None = Field(default=None, ge=0)
    burst: float | None = Field(default=None, ge=1)
    calls: list[CallKind] | None = None
    source: str | None = None

    @model_validator(mode="after")
    def _one_rate(self) -> BudgetSettings:
        if self.per_s is not None and self.per_min is not None:
            raise ValueError("give per_s or per_min, not both")
        if self.source is not None and not self.source.startswith(("http://", "https://")):
            raise ValueError(f"source {self.source!r} must be the documentation URL of the numbers")
        return self

    def merged(self, name: str, default: SourcedBudget | None) -> SourcedBudget:
        """This table over the platform's default budget of the same name.

        Raises:
            ValueError: a new budget lacks its scope, rate or source.
        """
        base = default.budget if default is not None else None
        scope = self.scope or (base.scope if base else None)
        per_s = self.per_s if self.per_s is not None else (self.per_min / 60 if self.per_min is not None else None)
        if per_s is None and base is not None:
            per_s = base.per_s
        source = self.source or (default.source if default else None)
        if scope is None or per_s is None or source is None:
            raise ValueError(f"new budget {name!r} needs scope, per_s or per_min, and source (its documentation URL)")
        burst = self.burst if self.burst is not None else (base.burst if base else 1.0)
        calls = frozenset(self.calls) if self.calls is not None else (base.calls if base else MESSAGE_CALLS)
        return SourcedBudget(Budget(name, scope, per_s, burst, calls), source)


class WindowTemplateSettings(Strict):
    """``[channels.NAME.window_template]`` (WhatsApp): the approved message template sent when the 24-hour customer
    service window is closed (error 131047), so the person learns an answer waits and replies to reopen it
    (:mod:`adapters.whatsapp.window`; https://developers.facebook.com/docs/whatsapp/cloud-api/guides/send-message-templates).

    Attributes:
        name: the template's name as approved in WhatsApp Manager (lowercase letters, digits, ``_``).
        language: its language code as approved (``en_US``, ``de``).
        parameter: what fills its one body variable ``{{1}}``: ``first_line`` (the answer's first line, its
            whitespace collapsed, at most 60 characters), ``fixed`` (``text``), or ``none`` (a template without
            variables).
        text: the fixed text when ``parameter = "fixed"``.
    """

    name: str = Field(pattern=r"^[a-z0-9_]{1,512}$")
    language: str = Field(pattern=r"^[a-z]{2,3}(_[A-Za-z]{2,4})?$")
    parameter: Literal["first_line", "fixed", "none"] = "first_line"
    text: str | None = Field(default=None, min_length=1, max_length=60)

    @model_validator(mode="after")
    def _text_when_fixed(self) -> WindowTemplateSettings:
        if (self.parameter == "fixed") != (self.text is not None):
            raise ValueError('window_template: text is set exactly when parameter = "fixed"')
        return self
