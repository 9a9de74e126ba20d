"""The web channel: the sidecar's own live run page and SSE stream (``platform = "web"``); its registration:
:data:`PLATFORM`.

The page's classes (and starlette with them) are imported when first used: the registry reads :data:`PLATFORM`
while the settings load, before the service's modules.
"""

from typing import TYPE_CHECKING, Any

from streamrelay.adapters.web.platform import PLATFORM

if TYPE_CHECKING:
    from streamrelay.adapters.web.adapter import WebAdapter
    from streamrelay.adapters.web.routes import web_routes
    from streamrelay.adapters.web.tokens import ReadTokens

_LAZY = {
    "WebAdapter": "streamrelay.adapters.web.adapter",
    "web_routes": "streamrelay.adapters.web.routes",
    "ReadTokens": "streamrelay.adapters.web.tokens",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PLATFORM", "ReadTokens", "WebAdapter", "web_routes"]
