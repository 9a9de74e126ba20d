"""The one JSON type of the codebase: what a value is when it truly is arbitrary JSON.

Most of what flows through streamrelay has a shape and a class (events, units, live events, calls, reports); a few
values are arbitrary JSON by nature and stay so: a tool call's arguments, a run's ``overrides`` before they are
checked, a JSON object read back from a store or a request body before its model reads it. They are typed here,
once, precisely (:data:`JsonValue` is recursive), so a reader narrows each value (``isinstance``) instead of trusting
an ``Any``::

    args: JsonObject = strict_json_object('{"q": "weather", "days": 3}')
    days = args.get("days")
    if isinstance(days, int): ...

A pydantic field typed :data:`JsonObject` is checked as an object with string keys, and its JSON Schema is
``{"type": "object", "additionalProperties": true}`` (the contracts' committed schemas, docs/schema). Its values are
not walked: they come from a JSON decoder, so they are JSON by construction (pydantic assumes the same of its own
``JsonValue`` read from JSON text), and walking them would cost a pass per event and refuse what nests past
pydantic's depth limit, which the pipeline lane reports as a malformed call instead (:mod:`core.lanes.pipeline`).
Python callers are held to the type by mypy.
"""

from __future__ import annotations

from typing import Annotated, TypeAlias

from pydantic import GetPydanticSchema, JsonValue
from pydantic_core import core_schema

__all__ = ["JsonObject", "JsonValue"]

_OBJECT_SCHEMA = GetPydanticSchema(
    lambda _source, _handler: core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema())
)

JsonObject: TypeAlias = Annotated[dict[str, JsonValue], _OBJECT_SCHEMA]
"""One JSON object: string keys, each value a :data:`JsonValue` (``None``, ``bool``, ``int``, ``float``, ``str``, a
list of them or an object of them)."""
