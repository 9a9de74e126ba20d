"""Operating the service: logs (structlog, secrets redacted), metrics (prometheus-client), probes, and the
metered decorators of the ports (adapter, journal, ledger) that feed them."""

from streamrelay.adapters.ops.logs import LoggingSetup, configure_logging
from streamrelay.adapters.ops.metered import CallMetrics, metered
from streamrelay.adapters.ops.metrics import ServiceMetrics, call_outcome
from streamrelay.adapters.ops.probes import Health, IngestGate, ServiceState, probe_routes
from streamrelay.adapters.ops.redact import Redactor
from streamrelay.adapters.ops.stores import MeteredJournal, MeteredLedger

__all__ = [
    "CallMetrics",
    "Health",
    "IngestGate",
    "LoggingSetup",
    "MeteredJournal",
    "MeteredLedger",
    "Redactor",
    "ServiceMetrics",
    "ServiceState",
    "call_outcome",
    "configure_logging",
    "metered",
    "probe_routes",
]
