"""Keeping a flood of bad clients cheap for the process: the open-file limit, and the log lines such clients cause.

- :func:`raise_open_file_limit` lifts the soft ``RLIMIT_NOFILE`` to the hard limit (best effort);
  :func:`fit_to_open_files` then lowers ``max_connections`` below what is left once the service's own files (the
  journal, Redis, the platforms' connections) are set aside, with a warning: past the limit, ``accept()`` fails
  with EMFILE and the listener stops answering anyone.
- :class:`RateLimitFilter` lets through at most one record per message kind and period, and says on the next one
  how many it held back. :func:`install_flood_filters` puts one on ``asyncio`` (``socket.accept() out of system
  resource`` when the fds run out, ``socket.send() raised exception.``) and one on ``uvicorn.error``
  (``Invalid HTTP request received.`` for every garbage request): a flood of such clients wrote 34 MB of these
  lines in 5 s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from streamrelay.adapters.ingest_http.connections import ConnectionLimits

FILTER_PERIOD_S = 10.0
"""At most one record of each flood-prone kind per this many seconds."""

OPEN_FILES_RESERVED = 128
"""File descriptors kept for the service's own use beyond a tenth of the limit (journal, Redis, platform calls)."""

OPEN_FILES_TARGET = 1_048_576
"""The soft limit asked for when the hard limit is unlimited (setting an unlimited soft limit fails on macOS)."""

ASYNCIO_FLOODS = ("socket.accept() out of system resource", "socket.send() raised exception.")
"""asyncio's lines a flood of clients repeats (the accept loop on EMFILE; writes to closed sockets)."""

UVICORN_FLOODS = (
    "Invalid HTTP request received.",
    "Exceeded concurrency limit.",
    "Unsupported upgrade request.",
    "No supported WebSocket library detected.",
)
"""uvicorn's lines a client can cause at will, one per request."""

_log = logging.getLogger("streamrelay.connections")


class RateLimitFilter(logging.Filter):
    """A logging filter: at most one record per kind (a message prefix) and ``period_s``; the next one let through
    says how many were held back. Records of no listed kind pass untouched.

    Args:
        prefixes: the kinds: a record is of a kind when its message starts with the prefix.
        period_s: seconds between two records of one kind.
        clock: monotonic seconds (injected in tests).
    """

    def __init__(
        self, prefixes: Sequence[str], *, period_s: float = FILTER_PERIOD_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.prefixes = tuple(prefixes)
        self.period_s = period_s
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"RateLimitFilter({len(self.prefixes)} kinds, period_s={self.period_s:g})"

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.msg if isinstance(record.msg, str) else str(record.msg)
        kind = next((prefix for prefix in self.prefixes if message.startswith(prefix)), None)
        if kind is None:
            return True
        now = self._clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.period_s:
            self._held[kind] = self._held.get(kind, 0) + 1
            return False
        self._last[kind] = now
        held = self._held.pop(kind, 0)
        if held:
            record.msg = message + f" ({held} more like it since the last one were not logged)"
        return True


_FILTERS: dict[str, RateLimitFilter] = {}


def install_flood_filters(period_s: float = FILTER_PERIOD_S) -> None:
    """Put a :class:`RateLimitFilter` on the ``asyncio`` and ``uvicorn.error`` loggers (once per process: a second
    call changes nothing)."""
    for name, prefixes in (("asyncio", ASYNCIO_FLOODS), ("uvicorn.error", UVICORN_FLOODS)):
        if name in _FILTERS:
            continue
        _FILTERS[name] = RateLimitFilter(prefixes, period_s=period_s)
        logging.getLogger(name).addFilter(_FILTERS[name])


def raise_open_file_limit() -> int | None:
    """Lift the soft ``RLIMIT_NOFILE`` to the hard limit, best effort (a refusal leaves it as it was).

    Returns:
        The soft limit in force afterwards, or None when it is unlimited or the platform has no ``resource`` module.
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = OPEN_FILES_TARGET if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            _log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def connection_ceiling(open_files: int) -> int:
    """The most connections a listener may hold under an open-file limit of ``open_files`` (at least 1)."""
    return max(1, open_files - OPEN_FILES_RESERVED - open_files // 10)


def fit_to_open_files(limits: ConnectionLimits, open_files: int | None) -> ConnectionLimits:
    """``limits`` with ``max_connections`` (and the per-peer cap) lowered to :func:`connection_ceiling`, with a
    warning when that changes them (``open_files`` None: unlimited, unchanged)."""
    if open_files is None:
        return limits
    ceiling = connection_ceiling(open_files)
    if limits.max_connections <= ceiling:
        return limits
    _log.warning(
        "service.connections.max_connections lowered from %d to %d: the open-file limit is %d "
        "(raise it with ulimit -n or LimitNOFILE= to take more connections)",
        limits.max_connections,
        ceiling,
        open_files,
        extra={"max_connections": ceiling, "open_files": open_files},
    )
    return replace(
        limits, max_connections=ceiling, max_connections_per_peer=min(limits.max_connections_per_peer, ceiling)
    )
