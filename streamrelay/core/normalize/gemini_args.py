"""Gemini / Vertex streamed function-call arguments (``streamFunctionCallArguments``) assembled into whole calls.

Source: the ``FunctionCall`` and ``PartialArg`` types of the Vertex AI API (googleapis python-genai
``google/genai/types.py``: ``FunctionCall.partial_args``, ``FunctionCall.will_continue``, ``PartialArg.json_path``,
``string_value`` / ``number_value`` / ``bool_value`` / ``null_value``, ``PartialArg.will_continue``), camelCase on the
wire. A call streamed so opens with a ``functionCall`` part that names it (``name``, maybe ``id`` and ``args``) and says
``willContinue: true``; the next parts carry ``partialArgs`` (and no name, or the same name and id) until one without
``willContinue`` (often an empty ``functionCall: {}``) ends it. A ``PartialArg`` sets the value at its ``jsonPath``
(RFC 9535, here ``$.a.b``, ``$['a b'][0]``, ``$["a"]``); with ``willContinue: true`` the string at that path goes on in
the next ``PartialArg`` for the same path (appended).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from streamrelay.core.normalize.base import JsonObject

_SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_\-]*)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]")
_MAX_INDEX = 10_000
"""The largest array index a path may name (a bigger one would allocate a huge list from one line)."""


class PartialArgError(ValueError):
    """A ``PartialArg`` this reader cannot apply: an unsupported path, or one that contradicts the value so far."""


def parse_path(path: str) -> list[str | int]:
    """The keys of an RFC 9535 path of the forms Vertex sends (``$.a``, ``$['a'][0]``, ``$["a"].b``).

    Raises:
        PartialArgError: another form (``$..a``, filters, wildcards), or the root ``$`` alone.
    """
    if not path.startswith("$"):
        raise PartialArgError(f"a partialArgs jsonPath must start with '$', got {path[:80]!r}")
    keys: list[str | int] = []
    at = 1
    while at < len(path):
        match = _SEGMENT.match(path, at)
        if match is None:
            raise PartialArgError(f"partialArgs jsonPath {path[:80]!r} is not a plain path ($.a, $['a'][0])")
        name, index, single, double = match.groups()
        if index is not None:
            if int(index) > _MAX_INDEX:
                raise PartialArgError(f"partialArgs jsonPath {path[:80]!r} names an index past {_MAX_INDEX}")
            keys.append(int(index))
        else:
            keys.append(name if name is not None else (single if single is not None else double or ""))
        at = match.end()
    if not keys:
        raise PartialArgError("a partialArgs jsonPath must name an argument, not the root '$'")
    return keys


_MISSING = object()


def _value(partial: JsonObject) -> object:
    """The value a ``PartialArg`` carries, or ``_MISSING``."""
    for key in ("stringValue", "numberValue", "boolValue"):
        if key in partial:
            return partial[key]
    if "nullValue" in partial:
        return None
    return _MISSING


@dataclass
class StreamedCall:
    """One function call whose arguments arrive in parts.

    Attributes:
        id: the call's id (the provider's, else one made for it).
        name: the function's name.
        args: the arguments so far.
        broken: why the parts could not be applied (the call then ends with no arguments: malformed, never run).
    """

    id: str
    name: str
    args: JsonObject = field(default_factory=dict)
    broken: str | None = None
    _continuing: set[str] = field(default_factory=set)

    def apply(self, call: JsonObject) -> None:
        """Apply one ``functionCall`` part's ``args`` (merged at the top) and ``partialArgs`` (in order)."""
        if self.broken is not None:
            return
        whole = call.get("args")
        if isinstance(whole, dict):
            self.args.update(whole)
        partials = call.get("partialArgs")
        if partials is None:
            return
        try:
            if not isinstance(partials, list):
                raise PartialArgError("'partialArgs' must be a list")
            for partial in partials:
                self._partial(partial)
        except PartialArgError as exc:
            self.broken = str(exc)

    def _partial(self, partial: object) -> None:
        if not isinstance(partial, dict) or not isinstance(partial.get("jsonPath"), str):
            raise PartialArgError(f"a partialArgs item needs a string 'jsonPath', got {str(partial)[:80]!r}")
        path = partial["jsonPath"]
        value = _value(partial)
        if value is not _MISSING:
            keys = parse_path(path)
            container, last = self._parent(keys)
            old = container.get(last) if isinstance(container, dict) else _item(container, last)
            if path in self._continuing:
                if not isinstance(value, str) or not isinstance(old, str):
                    raise PartialArgError(f"the string at {path[:80]!r} goes on with a {type(value).__name__}")
                value = old + value
            elif isinstance(old, dict | list):
                raise PartialArgError(f"{path[:80]!r} holds an object or array: a value cannot replace it")
            _put(container, last, value)
        if partial.get("willContinue") is True:
            self._continuing.add(path)
        else:
            self._continuing.discard(path)

    def _parent(self, keys: list[str | int]) -> tuple[Any, str | int]:
        """The object or array that holds the last key of ``keys`` (made on the way), and that key."""
        node: Any = self.args
        if not isinstance(keys[0], str):
            raise PartialArgError("a partialArgs jsonPath must start with an argument's name")
        for key, after in itertools.pairwise(keys):
            child = node.get(key) if isinstance(node, dict) else _item(node, key)
            if child is None:
                child = {} if isinstance(after, str) else []
                _put(node, key, child)
            if isinstance(after, str) and not isinstance(child, dict):
                raise PartialArgError(f"{key!r} is not an object, so it has no {after!r}")
            if isinstance(after, int) and not isinstance(child, list):
                raise PartialArgError(f"{key!r} is not an array, so it has no [{after}]")
            node = child
        return node, keys[-1]


def _item(node: Any, key: str | int) -> Any:
    if isinstance(key, str) or not isinstance(node, list):
        raise PartialArgError(f"[{key!r}] names an array item of something that is not an array")
    return node[key] if key < len(node) else None


def _put(node: Any, key: str | int, value: Any) -> None:
    if isinstance(node, dict):
        if not isinstance(key, str):
            raise PartialArgError(f"[{key}] names an array item of an object")
        node[key] = value
        return
    if not isinstance(key, int):
        raise PartialArgError(f"{key!r} names a field of an array")
    node.extend([None] * (key + 1 - len(node)))
    node[key] = value
