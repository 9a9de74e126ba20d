from streamrelay.adapters.ingest_http.app import IngestObserver, as_callers, create_app
from streamrelay.adapters.ingest_http.callers import Caller, Callers

__all__ = ["Caller", "Callers", "IngestObserver", "as_callers", "create_app"]
