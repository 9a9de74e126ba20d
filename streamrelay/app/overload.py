"""The service's push-back past capacity (:class:`core.ingest.pressure.Pressure`) from ``[service]``'s settings."""

from __future__ import annotations

from collections.abc import Callable

from streamrelay.config.settings import ServiceSettings
from streamrelay.core.ingest.pressure import Pressure
from streamrelay.core.ingest.surface import RunRelay
from streamrelay.core.run.relay import Relay


def service_pressure(relay: RunRelay, service: ServiceSettings) -> Pressure:
    """Push-back by the loop's lag (``overload_lag_ms``) and by the events waiting for the runs' workers
    (``overload_backlog_events``), with ``overload_retry_after_s``."""
    return Pressure(
        max_lag_s=service.overload_lag_ms / 1000,
        retry_after_s=service.overload_retry_after_s,
        backlog=backlog_of(relay),
        max_backlog=service.overload_backlog_events,
    )


def backlog_of(relay: RunRelay) -> Callable[[], int] | None:
    """How many events wait for their runs' workers in ``relay`` (O(active runs)), or None for a replica's front
    (its runs live in its partitions' relays)."""
    return relay.backlog if isinstance(relay, Relay) else None
