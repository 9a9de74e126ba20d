"""The outcome of one case, as the runner reports it and the CLI writes it (``DIR/<id>.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CaseResult:
    """The outcome of one case: ``passed``, the failures, and the transcript (README shapes)."""

    id: str
    type: str
    passed: bool
    failures: list[str] = field(default_factory=list)
    transcript: dict[str, Any] = field(default_factory=dict)
    unsupported: str | None = None
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.transcript)
        out["id"], out["passed"], out["failures"] = self.id, self.passed, self.failures
        if self.unsupported:
            out["unsupported"] = self.unsupported
        return out


def call_record(call: Any, t0: float) -> dict[str, Any]:
    """One platform call as the transcript lists it (tests/cases/README.md): a mock's :class:`mocks.common.RecordedCall`
    or the web channel's ``WebCall``; ``t_ms`` counts from ``t0`` (monotonic seconds)."""
    record = {
        "method": call.method,
        "chat_id": call.chat_id,
        "message_id": call.message_id,
        "text": call.text,
        "t_ms": round((call.t - t0) * 1000, 1),
        "status": call.status,
        "ok": call.ok,
    }
    if getattr(call, "retry_after_s", None) is not None:
        record["retry_after_s"] = call.retry_after_s
    return record
