"""Connection limits of an HTTP listener: caps per peer and in all, header and body read timeouts, keepalive.

uvicorn's HTTP protocol, subclassed (:mod:`adapters.ingest_http.protocols`: httptools where it is installed, else
h11), asks one :class:`ConnectionGuard` per listener:

- a connection past ``max_connections`` (all peers) or ``max_connections_per_peer`` (one client IP) is refused in
  ``connection_made``: a fixed ``503`` with ``Connection: close`` and a short JSON body naming the limit and its
  setting is written, the transport is closed; no h11 event is parsed and no ASGI task is made;
- a connection whose request headers are not complete ``header_timeout_s`` after it opened (or, on a keep-alive
  connection, after the next request's first byte) gets a fixed ``408`` and is closed (slowloris);
- a request whose body stays silent ``body_idle_timeout_s`` is cut: ``408`` when no answer has started, else the
  connection is closed; the app's ``receive`` then sees ``http.disconnect``. While uvicorn holds reading paused
  (the app has not taken what came), silence is the service's, not the client's: the timer starts again;
- an idle keep-alive connection is closed after ``keepalive_timeout_s`` (uvicorn's own timer, set to it).
- a request answered before its body was all read (a refusal that never reads it: 401 for a missing or wrong
  token, 413, 429, a push-back ...) is answered with ``Connection: close`` (a client opens a new connection for its
  next request), then the connection's writing side is shut, what it still sends is discarded and it is closed
  :data:`~adapters.ingest_http.protocols.LINGER_S` later (at once when the client closes first); it holds no slot
  meanwhile (evicted first). Before, a refused request whose body trickled a byte at a time held its slot for good.
  On a listener with a ``vouch`` (ingest) this is for requests without a valid client token only: a client's own
  request answered early (413, a push-back 503) keeps its connection, the rest of its body read and discarded, so a
  client that reads its answer once its body is sent (httpx, ``RelayClient.stream``) still gets it.

Idle connections never deny a client with a valid token (issue 25: a sidecar on loopback sees every client, and any
local process, as one IP, so a cap per IP alone let 600 idle sockets refuse the bot). When the guard has a
``vouch`` (the ingest listener: a bearer token of a configured client), a connection past a cap is not refused at
once but kept on probation (:data:`PROBATION_S`, uncounted): if its first request head arrives and carries a valid
token, the guard evicts one connection that is not inside a request, to make room, and admits it; otherwise (no head
in time, no or a wrong token, nothing to evict) it gets the same fixed 503 as before. Who is evicted, in this order,
oldest first within each: a connection that has sent no byte; one still sending the head of its first request
(slowloris) or inside a request without a valid client token (a stranger that never reads its answers); an idle
keep-alive connection between two requests. A connection inside a request with a valid token (a live run's POST,
a watcher's stream) is never evicted, so a client's work is never cut for another's; evictions are closed without an
answer (a server may close an idle connection at any time, RFC 9112 §9.5) and counted as ``idle_evicted``. So an
unauthenticated or idle connection can no longer hold a slot a client needs; a client's own busy connections are
still capped per address (``max_connections_per_peer``) and in all (``max_connections``), and its runs per client
(``clients.NAME``).

Every refusal and cut is counted (the :class:`ConnectionObserver`, the service's metrics) and logged rate-limited:
the first of a quiet period at once, then one summary line per ``log_period_s`` with the counts by reason (logger
``streamrelay.connections``, WARNING). :mod:`adapters.ingest_http.noise` keeps uvicorn's and asyncio's own lines
about such clients from flooding, and fits ``max_connections`` to the process's open-file limit.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

LOG_PERIOD_S = 10.0
"""Seconds between two summary lines of refusals and cuts."""

MAX_PEERS_TRACKED = 1000
"""At most this many distinct peers are counted per log period (the rest count as ``other peers``)."""

PROBATION_S = 1.0
"""Seconds a connection past a cap has to send a request head with a valid token (then it is admitted by evicting an
idle connection) before it gets the fixed 503 (a client sends its head right after it connects)."""

_log = logging.getLogger("streamrelay.connections")


class Evictable(Protocol):
    """An admitted connection the guard may close to make room (a ``GuardedConnection`` of the protocols module)."""

    def idle_rank(self) -> int | None:
        """0: no byte received yet; 1: the head of its first request still coming; 2: idle between two requests (or
        the next head coming); None: inside a request (never evicted; one without a valid client token
        is 1)."""
        ...

    def evict(self) -> None:
        """Close the connection now, without an answer (the guard has already stopped counting it)."""
        ...


class CloseReason(enum.StrEnum):
    """Why a listener refused or cut a connection (the ``reason`` label of the metric)."""

    MAX_CONNECTIONS = "max_connections"
    MAX_CONNECTIONS_PER_PEER = "max_connections_per_peer"
    HEADER_TIMEOUT = "header_timeout"
    BODY_IDLE_TIMEOUT = "body_idle_timeout"
    IDLE_EVICTED = "idle_evicted"
    """Closed to make room for a request with a valid token (module docstring)."""

    @property
    def setting(self) -> str:
        """The ``[service.connections]`` key that governs it, e.g. ``service.connections.header_timeout_s``."""
        if self is CloseReason.IDLE_EVICTED:
            return "service.connections.max_connections(_per_peer)"
        suffix = "_s" if self in (CloseReason.HEADER_TIMEOUT, CloseReason.BODY_IDLE_TIMEOUT) else ""
        return f"service.connections.{self.value}{suffix}"


@dataclass(frozen=True)
class ConnectionLimits:
    """The limits of one listener (``[service.connections]``, :class:`config.connections.ConnectionSettings`).

    Attributes:
        header_timeout_s: seconds to send complete request headers.
        body_idle_timeout_s: longest silence inside one request body, seconds.
        keepalive_timeout_s: an idle keep-alive connection's life, seconds.
        max_connections: open connections from all peers.
        max_connections_per_peer: open connections from one client IP.
        max_header_bytes: request line and headers, bytes (h11's max incomplete event size).
    """

    header_timeout_s: float
    body_idle_timeout_s: float
    keepalive_timeout_s: float
    max_connections: int
    max_connections_per_peer: int
    max_header_bytes: int


class ConnectionObserver(Protocol):
    """Told of every refused or cut connection (the service's metrics implement it)."""

    def connection_closed(self, listener: str, reason: str) -> None:
        """One connection of ``listener`` refused or cut, for ``reason`` (a :class:`CloseReason` value)."""
        ...


def fixed_response(status: int, phrase: str, body: dict[str, Any], *, retry_after_s: int | None = None) -> bytes:
    """A complete HTTP/1.1 answer that closes the connection: status line, headers, a JSON body."""
    payload = json.dumps(body, separators=(",", ":")).encode()
    head = [
        f"HTTP/1.1 {status} {phrase}",
        "Content-Type: application/json",
        f"Content-Length: {len(payload)}",
        "Connection: close",
    ]
    if retry_after_s is not None:
        head.append(f"Retry-After: {retry_after_s}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + payload


def _answers(limits: ConnectionLimits) -> dict[CloseReason, bytes]:
    caps = {
        CloseReason.MAX_CONNECTIONS: (limits.max_connections, "too many open connections"),
        CloseReason.MAX_CONNECTIONS_PER_PEER: (
            limits.max_connections_per_peer,
            "too many connections from your address",
        ),
    }
    answers = {
        reason: fixed_response(
            503,
            "Service Unavailable",
            {"error": f"{what}: {reason.setting} ({cap}) reached", "limit": reason.value, "setting": reason.setting},
            retry_after_s=1,
        )
        for reason, (cap, what) in caps.items()
    }
    timeouts = {
        CloseReason.HEADER_TIMEOUT: (limits.header_timeout_s, "request headers not complete within"),
        CloseReason.BODY_IDLE_TIMEOUT: (limits.body_idle_timeout_s, "request body silent for"),
    }
    for reason, (seconds, what) in timeouts.items():
        error = f"{what} {seconds:g} s ({reason.setting})"
        body = {"error": error, "limit": reason.value, "setting": reason.setting}
        answers[reason] = fixed_response(408, "Request Timeout", body)
    return answers


class ConnectionGuard:
    """Counts one listener's open connections, admits or refuses new ones, and reports refusals and cuts.

    Used from the event loop's thread only (protocol callbacks); no locking.

    Args:
        limits: the listener's limits.
        listener: its name in log lines and metrics (``ingest``, ``ops``).
        observer: told of every refusal and cut (None: nobody).
        log_period_s: seconds between two summary lines.
        vouch: whether an ``Authorization`` header value carries a valid client token; set, a connection past a cap
            gets :data:`PROBATION_S` to prove it and is then admitted by evicting an idle one (module docstring).
            None: refused at once.
    """

    def __init__(
        self,
        limits: ConnectionLimits,
        *,
        listener: str = "ingest",
        observer: ConnectionObserver | None = None,
        log_period_s: float = LOG_PERIOD_S,
        vouch: Callable[[str], bool] | None = None,
    ) -> None:
        self.limits = limits
        self.vouch = vouch
        self.on_probation = 0
        """Connections past a cap waiting for their first request head (:data:`PROBATION_S`)."""
        self._conns: dict[str, dict[Evictable, None]] = {}
        """Each peer's admitted connections that registered (:meth:`track`), oldest first."""
        self.listener = listener
        self.observer = observer
        self.log_period_s = log_period_s
        self.open = 0
        self.per_peer: dict[str, int] = {}
        self.answers = _answers(limits)
        self._counts: Counter[CloseReason] = Counter()
        self._peers: Counter[str] = Counter()
        self._summary: asyncio.TimerHandle | None = None

    def __repr__(self) -> str:
        return f"ConnectionGuard({self.listener!r}, open={self.open})"

    def count(self) -> int:
        """Open connections now."""
        return self.open

    def admit(self, peer: str) -> CloseReason | None:
        """Count a new connection from ``peer``; or, past a cap, count nothing and return the cap it hit."""
        if self.open >= self.limits.max_connections:
            return CloseReason.MAX_CONNECTIONS
        held = self.per_peer.get(peer, 0)
        if held >= self.limits.max_connections_per_peer:
            return CloseReason.MAX_CONNECTIONS_PER_PEER
        self.open += 1
        self.per_peer[peer] = held + 1
        return None

    def track(self, peer: str, conn: Evictable) -> None:
        """Remember an admitted connection of ``peer`` as a candidate for :meth:`make_room` (until :meth:`release`)."""
        self._conns.setdefault(peer, {})[conn] = None

    def probation_full(self) -> bool:
        """No more connections may wait on probation (as many as ``max_connections``: each holds a socket)."""
        return self.on_probation >= self.limits.max_connections

    def admit_vouched(self, peer: str) -> CloseReason | None:
        """Admit a connection from ``peer`` whose request carries a valid token: past a cap, first evict one idle
        connection of that peer (``max_connections_per_peer``) or of any peer (``max_connections``); the cap it
        still hits when nothing can be evicted, else None (counted: admitted)."""
        for _ in range(2):  # at most one eviction per cap
            refused = self.admit(peer)
            if refused is None:
                return None
            if not self._evict_one(peer if refused is CloseReason.MAX_CONNECTIONS_PER_PEER else None):
                return refused
        return self.admit(peer)

    def _evict_one(self, peer: str | None) -> bool:
        """Evict the idlest connection of ``peer`` (None: of any peer), the oldest of its rank
        (:meth:`Evictable.idle_rank`); False when none is idle. O(connections): only past a cap."""
        best: tuple[int, int, str, Evictable] | None = None
        for conn_peer in [peer] if peer is not None else list(self._conns):
            for age, conn in enumerate(self._conns.get(conn_peer, {})):
                rank = conn.idle_rank()
                if rank is not None and (best is None or (rank, age) < (best[0], best[1])):
                    best = (rank, age, conn_peer, conn)
        if best is None:
            return False
        _, _, victim_peer, victim = best
        self.release(victim_peer, victim)
        victim.evict()
        self.note(CloseReason.IDLE_EVICTED, victim_peer)
        return True

    def release(self, peer: str, conn: Evictable | None = None) -> None:
        """An admitted connection from ``peer`` (``conn``, when it was tracked) is gone."""
        if conn is not None:
            conns = self._conns.get(peer)
            if conns is not None:
                conns.pop(conn, None)
                if not conns:
                    del self._conns[peer]
        self.open = max(0, self.open - 1)
        held = self.per_peer.get(peer, 0) - 1
        if held > 0:
            self.per_peer[peer] = held
        else:
            self.per_peer.pop(peer, None)

    def note(self, reason: CloseReason, peer: str) -> None:
        """A connection from ``peer`` was refused or cut for ``reason``: count it, log it (rate-limited)."""
        if self.observer is not None:
            self.observer.connection_closed(self.listener, reason.value)
        if self._summary is None:
            _log.warning(
                "%s connection from %s %s (%s); more are summarized every %g s",
                self.listener,
                peer,
                "refused" if reason in (CloseReason.MAX_CONNECTIONS, CloseReason.MAX_CONNECTIONS_PER_PEER) else "cut",
                reason.setting,
                self.log_period_s,
                extra={"listener": self.listener, "peer": peer, "reason": reason.value},
            )
            self._summary = asyncio.get_running_loop().call_later(self.log_period_s, self._flush)
            return
        self._counts[reason] += 1
        if peer in self._peers or len(self._peers) < MAX_PEERS_TRACKED:
            self._peers[peer] += 1
        else:
            self._peers["other peers"] += 1

    def _flush(self) -> None:
        self._summary = None
        if not self._counts:
            return  # a quiet period: the next one is logged at once again
        self.flush()
        self._summary = asyncio.get_running_loop().call_later(self.log_period_s, self._flush)

    def flush(self) -> None:
        """Log the summary of what was counted since the last line (nothing when nothing was)."""
        if not self._counts:
            return
        counts = {reason.value: n for reason, n in self._counts.most_common()}
        top, top_n = self._peers.most_common(1)[0]
        _log.warning(
            "%s connections refused or cut lately: %s; peers: %d (most: %s, %d)",
            self.listener,
            ", ".join(f"{n} {reason}" for reason, n in counts.items()),
            len(self._peers),
            top,
            top_n,
            extra={"listener": self.listener, "counts": counts, "peers": len(self._peers), "open": self.open},
        )
        self._counts.clear()
        self._peers.clear()

    def close(self) -> None:
        """The listener stopped: log what is still counted, stop the summary timer."""
        if self._summary is not None:
            self._summary.cancel()
            self._summary = None
        self.flush()


def _peer_of(transport: asyncio.BaseTransport) -> str:
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple | list) and peer:
        return str(peer[0])
    return "unix" if peer is not None else "unknown"
