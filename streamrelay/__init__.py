"""streamrelay: the delivery sidecar between LLM agents and the chats people read them in.

What a bot imports is the client: ``from streamrelay import RelayClient`` (``streamrelay.app.client``). The sidecar's
parts live in sub-packages by layer: ``streamrelay.core`` (sans-I/O: ingest, the run, the delivery machine, chunking),
``streamrelay.adapters`` (platforms, SQLite, Redis, HTTP), ``streamrelay.config``, ``streamrelay.app`` (the commands)
and ``streamrelay.mocks`` (the mock platforms the demo, tests and chaos campaign talk to).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamrelay.app.client import RelayClient

try:
    __version__ = version("streamrelay")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = ["RelayClient", "__version__"]


def __getattr__(name: str) -> Any:
    """``RelayClient`` imported on first use: ``import streamrelay`` alone (the CLI's own start) stays cheap."""
    if name == "RelayClient":
        from streamrelay.app.client import RelayClient

        return RelayClient
    raise AttributeError(f"module 'streamrelay' has no attribute {name!r}")
