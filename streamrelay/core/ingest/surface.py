"""The service's HTTP surface port: what the ingest, pipeline, live-page and ops routes need of a relay.

One process serves :class:`core.run.relay.Relay`; a replica serves its front (``app.replicas.front.ReplicaFront``),
which routes lines through Redis and reads the runs its partitions hold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from streamrelay.core.contracts.answers import RunListing
from streamrelay.core.contracts.units import PipelineUnit
from streamrelay.core.errors import IngestError
from streamrelay.core.ingest.admission import LineResult
from streamrelay.core.lanes.gate import GateDecision
from streamrelay.core.lanes.pipeline import PipelineLane
from streamrelay.core.records.report import DeliveryReport
from streamrelay.core.run.audit import AuditReport
from streamrelay.core.run.monitor import Watched
from streamrelay.core.run.stop import StopState
from streamrelay.core.run.timeline import Timeline


class RunRelay(Protocol):
    """What the service's HTTP surface needs of a relay (module docstring)."""

    async def submit_lines(
        self, lines: Sequence[tuple[Any, str | None]], run_hint: str | None = None
    ) -> list[LineResult | IngestError]: ...

    async def report(self, run_id: str) -> DeliveryReport | None: ...

    async def wait_done(self, run_id: str, timeout_s: float) -> DeliveryReport | None: ...

    def monitor(self, run_id: str) -> Watched | None: ...

    async def after_end(self, run_id: str, last_id: int, timeout_s: float) -> Watched | None:
        """A finished run's monitor once it has events after ``last_id`` (a correction's), waiting up to
        ``timeout_s``; None when none came (:meth:`core.run.relay.Relay.after_end`)."""
        ...

    def lane(self, run_id: str) -> PipelineLane | None: ...

    async def gate(
        self, run_id: str, call_id: str, *, source_key: str | None = None, wait_s: float = 0.0
    ) -> tuple[GateDecision, PipelineUnit | None]: ...

    async def stop(self, run_id: str, by: str | None = None, reason: str | None = None) -> StopState: ...

    async def decide_approval(self, run_id: str, approval: str, decision: str, by: str | None) -> dict[str, Any]: ...

    def approval(self, run_id: str, approval: str) -> dict[str, Any]: ...

    def active_runs(self) -> list[str]: ...

    async def runs(self, *, everywhere: bool = False, bearer: str = "") -> RunListing: ...

    def timeline(self, run_id: str) -> Timeline | None:
        """The run's delivery timeline kept here (:mod:`core.run.timeline`), or None."""
        ...

    async def audit(self, run_id: str) -> AuditReport:
        """What the platform shows now of the run's delivered messages (raises :class:`core.run.audit.AuditError`)."""
        ...

    async def erase(self, run_id: str) -> dict[str, int]:
        """Erase the run's text from every store (raises :class:`core.errors.IngestError`: 404, 409, 503)."""
        ...

    async def erase_conversation(self, channel: str, chat_id: str, owns: Callable[[str], bool]) -> dict[str, Any]:
        """Erase every run of a conversation whose key ``owns`` accepts (raises ``IngestError``)."""
        ...
