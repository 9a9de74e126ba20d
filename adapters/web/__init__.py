"""The web channel: the sidecar's own live run page and SSE stream (``platform = "web"``)."""

from adapters.web.adapter import WebAdapter
from adapters.web.routes import web_routes
from adapters.web.tokens import ReadTokens

__all__ = ["ReadTokens", "WebAdapter", "web_routes"]
