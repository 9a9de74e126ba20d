"""uvicorn's HTTP protocols under a :class:`~adapters.ingest_http.connections.ConnectionGuard` (the rules are in that
module's docstring): the guard's part (:class:`GuardedConnection`) mixed into uvicorn's httptools protocol (the
default where httptools is installed: its parser is llhttp, in C, and a request costs about half the CPU of h11's)
or its h11 protocol (pure Python; the fallback). Both behave the same to a client: the same fixed answers, timers
and caps; past ``max_header_bytes`` of an unfinished request head, the same 400 ("Invalid HTTP request received.")
that h11's ``max_incomplete_event_size`` gives.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from streamrelay.adapters.ingest_http.connections import PROBATION_S, CloseReason, ConnectionGuard, _peer_of

LINGER_S = 2.0
"""Seconds a connection answered before its request's body was read (a refusal: 401, 413 ...; the answer says
``Connection: close``) stays open after the answer, its writing side shut (the client reads the answer, then end of
file) and the bytes it still sends discarded, before it is closed: closing at once, with bytes unread, would reset it
and could lose the answer. It holds no slot meanwhile (evicted first). A client that closes first ends it sooner.
Only for a request without a valid client token when the listener has a ``vouch`` (the ingest listener): a client's
own request answered early (413, a push-back 503) keeps its connection, the rest of its body read and discarded, so a
client that reads its answer only once its body is sent (httpx: ``RelayClient.stream``) gets it however late."""

_CLOSE = (b"connection", b"close")


@dataclass
class _Probation:
    """A connection past a cap waiting for its first request head (:data:`PROBATION_S`): the bytes it sent so far."""

    transport: asyncio.Transport
    peer: str
    reason: CloseReason
    timer: asyncio.TimerHandle
    head: bytearray = field(default_factory=bytearray)


def authorization(head: bytes) -> str | None:
    """The ``Authorization`` value of a request head (request line and headers, without the blank line), or None."""
    for line in head.split(b"\r\n")[1:]:
        name, colon, value = line.partition(b":")
        if colon and name.strip().lower() == b"authorization":
            return value.strip().decode("latin-1")
    return None


class GuardedConnection:
    """The guard's part of a uvicorn HTTP protocol (mixed in before uvicorn's class: :class:`GuardedH11Protocol`,
    :class:`GuardedHttpToolsProtocol`): caps in ``connection_made``, the header and
    body timers after each piece received. The protocol says where the request it reads is (:meth:`_reading_head`,
    :meth:`_reading_body`) and whether its answer started (:meth:`_answer_started`)."""

    guard: ClassVar[ConnectionGuard]
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    flow: Any
    cycle: Any

    def _guard_init(self) -> None:
        # uvicorn types it as whole seconds; call_later takes any float
        setattr(self, "timeout_keep_alive", self.guard.limits.keepalive_timeout_s)  # noqa: B010
        self._peer = ""
        self._admitted = False
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_seen = 0.0
        """Loop time of the request body's last piece (or of the last look while reading was paused)."""
        self._probation: _Probation | None = None
        self._bytes_seen = False
        """A byte came (an idle connection that never sent one is the first evicted)."""
        self._requested = False
        """A request head was complete once (idle afterwards: a keep-alive connection, the last evicted)."""
        self._released = False
        """Evicted: the guard no longer counts it."""
        self._linger_timer: asyncio.TimerHandle | None = None
        """Answered before its request's body was read: closing (:data:`LINGER_S`); what comes is discarded."""
        self._guarded_cycle: object = None
        """The request cycle whose answer :meth:`_guard_cycle` watches."""
        self._vouched: tuple[object, bool] = (None, False)
        """A request cycle and whether its request carries a valid client token (:meth:`_carries_token`)."""

    def _reading_head(self) -> bool:
        """The request line and headers are still coming (or the next request's, on a keep-alive connection)."""
        raise NotImplementedError

    def _reading_body(self) -> bool:
        """The request's body is still coming."""
        raise NotImplementedError

    def _answer_started(self) -> bool:
        """An answer to the request being read has started."""
        raise NotImplementedError

    def _idle_after_answer(self) -> bool:
        """The last request was answered and its body read (answered early, the rest discarded) and no byte of a
        next request came yet."""
        raise NotImplementedError

    def connection_made(self, transport: asyncio.Transport) -> None:
        peer = _peer_of(transport)
        refused = self.guard.admit(peer)
        if refused is None:
            self._admit(transport, peer)
        elif self.guard.vouch is not None and not self.guard.probation_full():
            self.guard.on_probation += 1
            timer = self._later(PROBATION_S, self._probation_over)
            self._probation = _Probation(transport, peer, refused, timer)
        else:
            self._refuse(transport, peer, refused)

    def _admit(self, transport: asyncio.Transport, peer: str) -> None:
        self._peer, self._admitted = peer, True
        self.guard.track(peer, self)
        super().connection_made(transport)  # type: ignore[misc]
        self._header_timer = self._later(self.guard.limits.header_timeout_s, self._headers_late)

    def _refuse(self, transport: asyncio.Transport, peer: str, reason: CloseReason) -> None:
        transport.write(self.guard.answers[reason])
        transport.close()
        self.guard.note(reason, peer)

    def _probation_took(self, data: bytes) -> bool:
        """On probation: keep ``data`` until the request head is complete, then admit (a valid token, room made by
        evicting an idle connection) or refuse; True. Not on probation: False (``data`` is the parser's)."""
        probation = self._probation
        if probation is None:
            return False
        probation.head += data
        end = probation.head.find(b"\r\n\r\n")
        if end < 0:
            if len(probation.head) > self.guard.limits.max_header_bytes:
                self._end_probation(probation.reason)
            return True
        header = authorization(bytes(probation.head[:end]))
        vouch = self.guard.vouch
        vouched = header is not None and vouch is not None and vouch(header)
        self._end_probation(self.guard.admit_vouched(probation.peer) if vouched else probation.reason)
        return True

    def _probation_over(self) -> None:
        if self._probation is not None:
            self._end_probation(self._probation.reason)

    def _end_probation(self, refused: CloseReason | None) -> None:
        probation, self._probation = self._probation, None
        if probation is None:
            return
        probation.timer.cancel()
        self.guard.on_probation -= 1
        if refused is not None:
            self._refuse(probation.transport, probation.peer, refused)
            return
        self._admit(probation.transport, probation.peer)
        self.data_received(bytes(probation.head))  # the parser reads the request from its first byte

    def idle_rank(self) -> int | None:
        """How idle this connection is (:meth:`adapters.ingest_http.connections.Evictable.idle_rank`): 0 no byte
        yet, 1 the head of its first request coming, 2 between two requests; None inside a request. A connection
        answered before its request's body was read (closing, :data:`LINGER_S`) is 0: nothing more is read from it.
        Inside a request without a valid client token (the listener has a ``vouch``) is 1, like a head coming: a
        stranger that pipelines requests and never reads the answers (stuck in write back-pressure, where no timer
        runs) must not hold a slot a client needs."""
        if self.transport.is_closing():
            return None
        if self._linger_timer is not None:
            return 0
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:  # a request being answered (or queued, pipelined)
            return 1 if self.guard.vouch is not None and not self._carries_token(cycle) else None
        if not self._reading_head():
            return None
        if not self._requested:
            return 1 if self._bytes_seen else 0
        return 2

    def evict(self) -> None:
        """Closed to make room for a request with a valid token (the guard released it already)."""
        self._released = True
        self._cancel_timers()
        self.transport.close()

    def _carries_token(self, cycle: Any) -> bool:
        """Whether the request of ``cycle`` (a uvicorn request cycle) carries a valid client token (the guard's
        ``vouch``; False without one). Asked once per request, only when it matters (an early answer, eviction)."""
        seen, vouched = self._vouched
        if seen is cycle:
            return vouched
        vouch = self.guard.vouch
        vouched = False
        if vouch is not None:
            for name, value in cycle.scope["headers"]:
                if name.lower() == b"authorization":
                    vouched = vouch(value.decode("latin-1"))
                    break
        self._vouched = (cycle, vouched)
        return vouched

    def _guard_cycle(self) -> None:
        """Once uvicorn made the cycle of a request whose head was just read: an answer that starts while that
        request's body is still coming (a refusal that never reads it: 401 for a missing or wrong token, 413, a
        push-back ...) to a request without a valid client token says ``Connection: close`` (so a client does not
        send its next request on this connection) and its end does not close the connection at once but
        :meth:`_linger` (else a body trickling a byte at a time would keep the slot of a refused request for good,
        and closing with bytes unread resets the connection, which can lose the answer). A request with a valid
        token keeps its connection (:data:`LINGER_S`). Whether the body is still coming is the cycle's own
        (``more_body``), not the parser's: httptools parses pipelined requests ahead of the one answered."""
        cycle = self.cycle
        if cycle is None or cycle is self._guarded_cycle:
            return
        self._guarded_cycle = cycle
        send = cycle.send

        async def guarded_send(message: Any) -> None:
            if message["type"] != "http.response.start":
                await send(message)
                return
            early = cycle.more_body and not self._lingering()
            if early and (self.guard.vouch is None or not self._carries_token(cycle)):
                headers = list(message.get("headers", ()))
                if _CLOSE not in headers:
                    message = {**message, "headers": [*headers, _CLOSE]}
                cycle.transport = _AnsweredEarly(self, cycle)
            elif cycle.transport is self.transport:
                cycle.transport = _HeadHeld(cycle, self.transport, self.loop)
            await send(message)

        cycle.send = guarded_send

    def _linger(self, cycle: Any) -> None:
        """``cycle``'s request answered before its body was all read (:meth:`_guard_cycle`), now asked to close:
        the writing side is shut, what still comes is discarded and the connection is closed :data:`LINGER_S` later
        (or when the client closes, or evicted before); the guard's timers stop. Body read by then: closed now."""
        transport = self.transport
        if transport.is_closing() or self._linger_timer is not None:
            return
        if not cycle.more_body or not transport.can_write_eof():
            transport.close()
            return
        self._cancel_timers()
        transport.write_eof()
        self._linger_timer = self._later(LINGER_S, transport.close)

    def _lingering(self) -> bool:
        """Closing after an answer given before the request's body was read: what comes is discarded."""
        return self._linger_timer is not None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._probation is not None:
            self._probation.timer.cancel()
            self._probation = None
            self.guard.on_probation -= 1
            return
        if not self._admitted:
            return  # refused: uvicorn never knew it
        self._admitted = False
        if not self._released:
            self.guard.release(self._peer, self)
        self._cancel_timers()
        super().connection_lost(exc)  # type: ignore[misc]

    def data_received(self, data: bytes) -> None:
        if self._probation_took(data) or self._lingering():
            return
        self._bytes_seen = True
        super().data_received(data)  # type: ignore[misc]
        self._watch()

    def _later(self, delay_s: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        return self.loop.call_later(delay_s, callback)

    def _cancel_timers(self) -> None:
        for timer in (self._header_timer, self._body_timer, self._linger_timer):
            if timer is not None:
                timer.cancel()
        self._header_timer = self._body_timer = self._linger_timer = None

    def _watch(self) -> None:
        """After bytes came: headers still coming → their deadline runs (armed once per request); a body coming →
        its silence counts from now; the body of a request answered early just ended, no next byte yet → idle
        between two requests (uvicorn's keep-alive timer, as after any answer); anything else → no timer of ours."""
        if self.transport.is_closing():
            self._cancel_timers()
            return
        if self._reading_head():
            if self._header_timer is None:
                if self._idle_after_answer():
                    self._cancel_timers()
                    protocol: Any = self
                    protocol._unset_keepalive_if_required()
                    protocol.timeout_keep_alive_task = self.loop.call_later(
                        protocol.timeout_keep_alive, protocol.timeout_keep_alive_handler
                    )
                    return
                self._header_timer = self._later(self.guard.limits.header_timeout_s, self._headers_late)
            return
        self._requested = True
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        if self._reading_body():
            self._body_seen = self.loop.time()  # one timer per silence, not one per piece: it looks here when due
            if self._body_timer is None:
                self._body_timer = self._later(self.guard.limits.body_idle_timeout_s, self._body_silent)
        elif self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or not self._reading_head():
            return
        if not self._answer_started():
            self.transport.write(self.guard.answers[CloseReason.HEADER_TIMEOUT])
        self.transport.close()
        self.guard.note(CloseReason.HEADER_TIMEOUT, self._peer)

    def _body_silent(self) -> None:
        self._body_timer = None
        if self.transport.is_closing() or not self._reading_body():
            return
        timeout_s = self.guard.limits.body_idle_timeout_s
        if self.flow.read_paused:  # the app has not taken what came: not the client's silence
            self._body_seen = self.loop.time()
        silent_s = self.loop.time() - self._body_seen
        if silent_s < timeout_s:
            self._body_timer = self._later(timeout_s - silent_s, self._body_silent)
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            self.transport.write(self.guard.answers[CloseReason.BODY_IDLE_TIMEOUT])
        if cycle is not None:
            cycle.disconnected = True  # the app's sends are dropped, its receive says http.disconnect
            cycle.message_event.set()
        self.transport.close()
        self.guard.note(CloseReason.BODY_IDLE_TIMEOUT, self._peer)


class _HeadHeld:
    """The transport a request cycle writes its answer to: the connection's own, except that the answer's head (status
    line and headers: the first write, when the answer starts) is held and written with the answer's first body write,
    so a whole answer to an agent's request (the head, then its JSON) goes out in one ``write`` system call instead of
    two (on loopback a write does the receiving side's work too: two per request were a tenth of the service's samples
    under batched ingest). Held at most until the end of the loop's turn (a streaming answer whose first body comes
    later gets its head then), and written first when the cycle closes the connection. The bytes and their order are
    the same; after that first body write the cycle writes to the connection directly again."""

    __slots__ = ("_cycle", "_first", "_held", "_transport", "is_closing")

    def __init__(self, cycle: Any, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._cycle = cycle
        self._transport = transport
        self._first = True
        self._held: bytes | None = None
        self.is_closing = transport.is_closing
        loop.call_soon(self._release)

    def write(self, data: bytes) -> None:
        if self._first:  # the head: held
            self._first, self._held = False, data
            return
        held, self._held = self._held, None
        self._direct()
        self._transport.write(data if held is None else held + data)

    def _direct(self) -> None:
        if self._cycle.transport is self:
            self._cycle.transport = self._transport

    def _release(self) -> None:
        """The end of the loop's turn the answer started in: what is held is written, and the cycle writes directly."""
        self._first = False
        held, self._held = self._held, None
        self._direct()
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:
        self._release()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _AnsweredEarly:
    """The transport a request cycle answering before its request's body was read writes to: the connection's own,
    except that closing it is :meth:`GuardedConnection._linger`."""

    __slots__ = ("_connection", "_cycle", "is_closing", "write")

    def __init__(self, connection: GuardedConnection, cycle: Any) -> None:
        self._connection = connection
        self._cycle = cycle
        self.write = connection.transport.write
        self.is_closing = connection.transport.is_closing

    def close(self) -> None:
        self._connection._linger(self._cycle)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection.transport, name)


class GuardedH11Protocol(GuardedConnection, H11Protocol):  # type: ignore[misc]
    """uvicorn's h11 protocol under a :class:`ConnectionGuard` (make a class per listener with
    :func:`guarded_protocol`)."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._guard_init()

    def handle_events(self) -> None:
        super().handle_events()
        self._guard_cycle()

    def _reading_head(self) -> bool:
        return self.conn.their_state is h11.IDLE

    def _reading_body(self) -> bool:
        return self.conn.their_state is h11.SEND_BODY

    def _answer_started(self) -> bool:
        return self.conn.our_state is not h11.IDLE

    def _idle_after_answer(self) -> bool:
        cycle = self.cycle
        return cycle is not None and cycle.response_complete and not self.conn.trailing_data[0]


HTTPTOOLS = importlib.util.find_spec("httptools") is not None
"""Whether httptools is installed (a dependency; it may lack a build for a platform)."""


class _Head:
    """Where the request an httptools protocol reads is (its parser's callbacks tell; h11 has states for it)."""

    HEAD, BODY, DONE = 0, 1, 2


_GuardedHttpTools: type[GuardedConnection] | None = None
if HTTPTOOLS:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class _GuardedHttpTools(GuardedConnection, HttpToolsProtocol):  # type: ignore[misc, no-redef]
        """uvicorn's httptools protocol under a :class:`ConnectionGuard` (make a class per listener with
        :func:`guarded_protocol`)."""

        def __init__(
            self,
            config: Config,
            server_state: ServerState,
            app_state: dict[str, Any],
            _loop: asyncio.AbstractEventLoop | None = None,
        ) -> None:
            super().__init__(config, server_state, app_state, _loop)
            self._guard_init()
            self._where = _Head.HEAD
            self._head_bytes = 0
            self._head_begun = False
            """A byte of the request head being read came (httptools: ``on_message_begin``)."""

        def data_received(self, data: bytes) -> None:
            if self._probation_took(data) or self._lingering():
                return
            if self._where != _Head.BODY:
                self._head_bytes += len(data)
            super().data_received(data)
            too_long = self._where == _Head.HEAD and self._head_bytes > self.guard.limits.max_header_bytes
            if too_long and not self.transport.is_closing():  # what h11 answers past max_incomplete_event_size
                self.send_400_response("Invalid HTTP request received.")

        def on_message_begin(self) -> None:
            self._where, self._head_begun = _Head.HEAD, True
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self._where, self._head_bytes = _Head.BODY, 0
            super().on_headers_complete()
            self._guard_cycle()

        def on_message_complete(self) -> None:
            # answered before its body came (a client's request: the connection stays, :data:`LINGER_S`): the next
            # request's head comes now, its timer armed by the next bytes
            cycle = self.cycle
            answered = cycle is not None and cycle.response_complete and not self.pipeline
            self._where = _Head.HEAD if answered else _Head.DONE
            self._head_begun = False
            super().on_message_complete()

        def on_response_complete(self) -> None:
            # the last request parsed was answered (none pipelined behind it): the next request's head, when it comes
            if self._where == _Head.DONE and not self.pipeline:
                self._where, self._head_bytes = _Head.HEAD, 0
            super().on_response_complete()

        def _reading_head(self) -> bool:
            return self._where == _Head.HEAD

        def _reading_body(self) -> bool:
            return self._where == _Head.BODY

        def _answer_started(self) -> bool:
            cycle = self.cycle
            return cycle is not None and not cycle.response_complete and cycle.response_started

        def _idle_after_answer(self) -> bool:
            cycle = self.cycle
            return cycle is not None and cycle.response_complete and not self._head_begun


GuardedHttpToolsProtocol: type[GuardedConnection] | None = _GuardedHttpTools
"""uvicorn's httptools protocol under the guard, or None when httptools is not installed."""


def guarded_protocol(guard: ConnectionGuard, http: str = "auto") -> type[GuardedConnection]:
    """A protocol class for one listener (uvicorn makes one instance per connection), bound to ``guard``.

    Args:
        guard: the listener's guard.
        http: ``httptools`` (uvicorn's protocol on the llhttp parser, in C: about half the CPU of h11 per request),
            ``h11`` (pure Python), or ``auto``: httptools when it is installed.
    """
    base: type[GuardedConnection] = GuardedH11Protocol
    if http == "httptools" or (http == "auto" and GuardedHttpToolsProtocol is not None):
        if GuardedHttpToolsProtocol is None:
            raise ImportError("httptools is not installed")
        base = GuardedHttpToolsProtocol
    return type(f"{base.__name__}_{guard.listener}", (base,), {"guard": guard})


def uvicorn_options(guard: ConnectionGuard, http: str = "auto") -> dict[str, Any]:
    """The ``uvicorn.Config`` keywords that put a listener under ``guard``: ``http``, ``timeout_keep_alive``,
    ``h11_max_incomplete_event_size``."""
    return {
        "http": guarded_protocol(guard, http),
        "timeout_keep_alive": max(1, round(guard.limits.keepalive_timeout_s)),  # the protocol uses the exact value
        "h11_max_incomplete_event_size": guard.limits.max_header_bytes,
    }
