"""The pipeline lane: complete, checked units only — never a preview.

Tool calls become units only when their arguments are complete (the ``end`` state, which the
normalizers emit at the provider's block-stop / arguments-done event) and parse strictly as a JSON
object. Arguments cut off by the end of the stream, or that fail to parse, become a
``tool_call.malformed`` unit that keeps the raw text: never a call.

Unit shapes (JSON)::

    {"kind": "tool_call", "run": "r1", "id": "c1", "name": "search", "args": {...}, "source": null}
    {"kind": "tool_call.malformed", "run": "r1", "id": "c1", "name": "write_file", "raw": "{\\"pa",
     "error": "arguments cut off by the end of the stream"}
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from core.events import Source, ToolCall, ToolCallState


@dataclass
class _OpenCall:
    id: str
    name: str | None
    source: Source | None
    parts: list[str] = field(default_factory=list)


class ToolCallCollector:
    """Collects tool-call fragments per (source, call id) and emits pipeline units."""

    def __init__(self, run: str) -> None:
        self._run = run
        self._open: dict[str, _OpenCall] = {}
        self.units: list[dict[str, Any]] = []

    def feed(self, event: ToolCall) -> dict[str, Any] | None:
        """Take one fragment; return the unit it completes, if any."""
        key = f"{event.source.key}\x00{event.id}" if event.source is not None else event.id
        call = self._open.get(key)
        if call is None:
            call = self._open[key] = _OpenCall(event.id, event.name, event.source)
        if event.name and not call.name:
            call.name = event.name
        if event.args_delta:
            call.parts.append(event.args_delta)
        if event.state is not ToolCallState.END:
            return None
        del self._open[key]
        if event.args is not None:
            return self._unit(call, event.args)
        raw = "".join(call.parts)
        try:
            args = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            return self._malformed(call, raw, f"arguments are not valid JSON: {exc.msg} at {exc.pos}")
        if not isinstance(args, dict):
            return self._malformed(call, raw, f"arguments must be a JSON object, got {type(args).__name__}")
        return self._unit(call, args)

    def close(self) -> list[dict[str, Any]]:
        """End of the run: every call still open was cut off; each becomes a malformed unit."""
        out = [
            self._malformed(c, "".join(c.parts), "arguments cut off by the end of the stream")
            for c in self._open.values()
        ]
        self._open.clear()
        return out

    def _unit(self, call: _OpenCall, args: dict[str, Any]) -> dict[str, Any]:
        unit = {"kind": "tool_call", "run": self._run, "id": call.id, "name": call.name, "args": args}
        unit["source"] = call.source.model_dump() if call.source else None
        self.units.append(unit)
        return unit

    def _malformed(self, call: _OpenCall, raw: str, error: str) -> dict[str, Any]:
        unit: dict[str, Any] = {
            "kind": "tool_call.malformed",
            "run": self._run,
            "id": call.id,
            "name": call.name,
            "raw": raw,
            "error": error,
        }
        unit["source"] = call.source.model_dump() if call.source else None
        self.units.append(unit)
        return unit
