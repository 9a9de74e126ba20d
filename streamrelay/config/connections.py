"""``[service.connections]``: how the ingest listener treats connections (timeouts, caps, keepalive).

Every limit protects the sidecar from clients that hold connections without using them (slowloris, half-open
floods): a connection past a cap is refused at once with a fixed 503 that names the setting, a connection that does
not finish its request headers in time gets a 408 and is closed. Refusals and cuts are logged at most once per
period as a summary (logger ``streamrelay.connections``) and counted in ``streamrelay_connections_closed_total``.
"""

from __future__ import annotations

from pydantic import Field

from streamrelay.config.tables import Strict


class ConnectionSettings(Strict):
    """One ``[service.connections]`` table: read timeouts, connection caps and keepalive of the HTTP listeners.

    Raises:
        pydantic.ValidationError: a value is out of range (the loader reports it as a ConfigError naming the key).
    """

    header_timeout_s: float = Field(default=10.0, gt=0, le=300)
    """Seconds a connection has to send its complete request headers, counted from when it opens (or, on a
    keep-alive connection, from the first byte of the next request); past it: 408 and closed (slowloris)."""
    body_idle_timeout_s: float = Field(default=120.0, gt=0, le=3600)
    """Longest silence between two pieces of one request body, in seconds; past it the request is cut (408 when no
    answer has started, else the connection is closed). One ingest POST may carry a whole live run over minutes: a
    client with nothing to say for longer sends an empty NDJSON line (``\\n``), which keeps the request open and is
    otherwise ignored. A body the service is slow to read (its buffers are full) never counts as silence."""
    keepalive_timeout_s: float = Field(default=20.0, gt=0, le=3600)
    """Seconds an idle keep-alive connection (between two requests) stays open. Keep it longer than the clients'
    own pool expiry (httpx: 5 s) so a client never reuses a connection the sidecar is closing."""
    max_connections: int = Field(default=2048, ge=1, le=1_000_000)
    """Open connections from all peers together; one more is refused with a 503 (unless its request carries a client's
    token and an idle connection can be closed, as for ``max_connections_per_peer``). Clamped at start below the
    process's open-file limit (with a warning), which the service first raises to its hard limit."""
    max_connections_per_peer: int = Field(default=512, ge=1, le=1_000_000)
    """Open connections from one client IP address; one more is refused with a 503, unless its first request carries
    a configured client's bearer token: then the idlest connection not inside a request is closed to make room
    (:mod:`adapters.ingest_http.connections`), so idle or unauthenticated connections never deny a client. Generous by
    default: the bot (one long POST per live run), the other replicas and a reverse proxy in front of live pages may
    share one IP. Above ``max_connections`` it has no effect."""
    max_header_bytes: int = Field(default=16 * 1024, ge=1024, le=1024 * 1024)
    """Bytes of request line and headers while unfinished (httptools and h11 alike); larger: 400 and closed."""
