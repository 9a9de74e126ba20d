"""The service's HTTP surface port: what the ingest, pipeline, live-page and ops routes need of a relay.

One process serves :class:`core.run.relay.Relay`; a replica serves its front (``app.replicas.front.ReplicaFront``),
which routes lines through Redis and reads the runs its partitions hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from streamrelay.core.contracts.answers import RunListing
from streamrelay.core.contracts.units import PipelineUnit
from streamrelay.core.errors import IngestError
from streamrelay.core.ingest.admission import LineResult
from streamrelay.core.lanes.gate import GateDecision
from streamrelay.core.lanes.pipeline import PipelineLane
from streamrelay.core.records.report import DeliveryReport
from streamrelay.core.run.monitor import Watched
from streamrelay.core.run.stop import StopState


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
