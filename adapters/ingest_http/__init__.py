from adapters.ingest_http.app import create_app

__all__ = ["create_app"]
