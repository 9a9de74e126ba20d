"""``[service.connections]``: how the ingest listener treats connections (timeouts, caps, keepalive)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ConnectionSettings(BaseModel):
    """One ``[service.connections]`` table (filled in by the connection-limits work)."""

    model_config = ConfigDict(extra="forbid")
