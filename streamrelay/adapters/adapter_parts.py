"""The parts every platform adapter has the same way, composed into each adapter class by name, never inherited (the
project keeps no class split across files by inheritance, shared/STYLE.md)::

    class MatrixAdapter:
        __repr__ = __str__ = shows(base_url="_conn.base_url")
        send_timeout_s = ConnectionTimeout()
        close = close_connection
        measure = measure_rendered

- :func:`shows`: a ``repr`` that names only the facts given (a bot id, a base URL), so a token or a secret held
  by the adapter never reaches a log line or an error (secrets never in reprs).
- :class:`ConnectionTimeout`: ``send_timeout_s`` read from and set on the adapter's connection (``_conn``), the one
  object that applies it to each call.
- :func:`close_connection`: closes the connection (each connection's ``close`` is idempotent).
- :func:`measure_rendered`: the units a text measures as sent, from the adapter's :class:`RenderCache`, which keeps
  the rendering for the send of the same text.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Protocol, overload

from streamrelay.core.ports import TextFormat


class Connection(Protocol):
    """What :class:`ConnectionTimeout` and :func:`close_connection` use of a platform connection."""

    send_timeout_s: float

    async def close(self) -> None: ...


class Connected(Protocol):
    """An adapter that makes its calls through one connection object (``_conn``)."""

    @property
    def _conn(self) -> Connection: ...


class Measured(Protocol):
    """A rendering that knows its length in the platform's unit."""

    @property
    def units(self) -> int: ...


class Rendering(Protocol):
    """An adapter with a render cache: ``render(text, fmt)`` gives a :class:`Measured` rendering."""

    @property
    def render(self) -> Callable[[str, TextFormat], Measured]: ...


def shows(**facts: str) -> Callable[[object], str]:
    """A ``__repr__`` that shows ``facts`` and nothing else: each name with the value at its attribute path (dotted,
    e.g. ``base_url="_conn.base_url"``), ``TypeName(bot_id='1', base_url='http://...')``. Never name a token."""
    getters = [(name, attrgetter(path)) for name, path in facts.items()]

    def __repr__(self: object) -> str:
        shown = ", ".join(f"{name}={get(self)!r}" for name, get in getters)
        return f"{type(self).__name__}({shown})"

    return __repr__


class ConnectionTimeout:
    """``send_timeout_s`` of an adapter (seconds one call may take): its connection's, read and set there (tests and
    the chaos campaign shorten it on a live adapter)."""

    @overload
    def __get__(self, adapter: None, owner: type) -> ConnectionTimeout: ...

    @overload
    def __get__(self, adapter: Connected, owner: type) -> float: ...

    def __get__(self, adapter: Connected | None, owner: type) -> ConnectionTimeout | float:
        if adapter is None:
            return self
        return adapter._conn.send_timeout_s

    def __set__(self, adapter: Connected, value: float) -> None:
        adapter._conn.send_timeout_s = value


async def close_connection(self: Connected) -> None:
    """Close the adapter's connection (idempotent)."""
    await self._conn.close()


def measure_rendered(self: Rendering, text: str, fmt: TextFormat) -> int:
    """The units ``text`` measures as the platform receives it (:meth:`core.ports.ChannelAdapter.measure`): its
    rendering's, in the adapter's unit (UTF-16 units of the body; Matrix: bytes of the edit's JSON). The rendering is
    kept: the send of the same text uses it."""
    return self.render(text, fmt).units
