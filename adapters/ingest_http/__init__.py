from adapters.ingest_http.app import IngestObserver, create_app

__all__ = ["IngestObserver", "create_app"]
