"""``[service.connections]`` → the connection guards of the sidecar's listeners (ingest, and ops when it has one).

At start-up the soft open-file limit is raised to the hard limit and ``max_connections`` is fitted below it
(:mod:`adapters.ingest_http.flood`), and asyncio's and uvicorn's flood-prone log lines are rate-limited.
"""

from __future__ import annotations

from dataclasses import replace

from streamrelay.adapters.ingest_http.connections import ConnectionGuard, ConnectionLimits
from streamrelay.adapters.ingest_http.flood import fit_to_open_files, install_flood_filters, raise_open_file_limit
from streamrelay.adapters.ops import ServiceMetrics
from streamrelay.config.connections import ConnectionSettings

OPS_MAX_CONNECTIONS = 64
"""The ops listener (probes and metrics: the kubelet, Prometheus) takes at most this many connections."""


def connection_limits(settings: ConnectionSettings | None = None) -> ConnectionLimits:
    """The listener limits of ``settings`` (None: the defaults), fitted to the process's open-file limit (raised
    first to its hard limit; a warning when ``max_connections`` must be lowered)."""
    limits = ConnectionLimits(**(settings or ConnectionSettings()).model_dump())
    return fit_to_open_files(limits, raise_open_file_limit())


def connection_guards(
    settings: ConnectionSettings | None, metrics: ServiceMetrics | None = None, *, ops: bool = False
) -> dict[str, ConnectionGuard]:
    """One guard per listener by name (``ingest``; ``ops`` too when ``ops``), reporting to ``metrics``
    (``streamrelay_connections_closed_total``, ``streamrelay_connections_open``)."""
    install_flood_filters()
    limits = connection_limits(settings)
    guards = {"ingest": ConnectionGuard(limits, listener="ingest", observer=metrics)}
    if ops:
        capped = replace(
            limits,
            max_connections=min(limits.max_connections, OPS_MAX_CONNECTIONS),
            max_connections_per_peer=min(limits.max_connections_per_peer, OPS_MAX_CONNECTIONS),
        )
        guards["ops"] = ConnectionGuard(capped, listener="ops", observer=metrics)
    if metrics is not None:
        for name, guard in guards.items():
            metrics.watch_connections(name, guard.count)
    return guards
