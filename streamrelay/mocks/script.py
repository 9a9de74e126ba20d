"""The scripted misbehaviour every mock shares: faults per call, latencies, outages (tests/cases/README.md).

A case (or ``POST /_mock/script``, :mod:`mocks.control`) says, in one language::

    "faults": [{"method": "sendMessage", "nth": 1, "reply": {"status": 502}, "after_commit": true}],
    "latency_ms": {"sendMessage": [0, 1500]},
    "outage": {"seconds": 8, "reply": "reset", "methods": ["sendMessage"]}

A reply is a :class:`Fault` mapping ``{"status", "description"?, "retry_after_s"?}`` (rendered in the
platform's error shape), a :class:`RawAnswer` mapping ``{"status", "body", "content_type"?}`` (sent as it is: an
answer in no platform's shape, e.g. a 200 ``{"ok": true}`` without ``result``, an empty body, an HTML page) or a
:class:`Hang` name. ``after_commit`` belongs to the fault object, never to the reply: the platform stores the
call exactly as on success, then answers the reply instead of success.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamrelay.mocks.calls import RecordedCall


class Hang(enum.StrEnum):
    """Scripted answers that never come: a timeout (the answer is held longer than any client waits) or a
    reset (the connection is closed without an answer)."""

    AFTER_COMMIT = "timeout_after_commit"
    """The call is processed (a message is stored), then the answer hangs."""
    BEFORE_COMMIT = "timeout_before_commit"
    """The call hangs and is never processed."""
    RESET = "reset"
    """The connection is closed at once without an answer; the call is never processed."""
    RESET_AFTER_COMMIT = "reset_after_commit"
    """The call is processed, then the connection is closed without an answer (``"reply": "reset"`` with
    ``"after_commit": true``)."""

    @property
    def commits(self) -> bool:
        """Whether the call is processed (stored) before the answer goes missing."""
        return self in (Hang.AFTER_COMMIT, Hang.RESET_AFTER_COMMIT)


@dataclass(frozen=True)
class Fault:
    """A scripted error answer: HTTP ``status``, an optional platform ``description`` and, for a 429, the
    ``retry_after_s`` to announce. Each mock renders it in its platform's error shape.

    ``after_commit``: the platform stores the call first (a message created or edited exactly as on
    success, recorded with its message id), then answers this error instead of success. Had the call been
    refused anyway (a validation error, a 429 past the rate limits), nothing is stored and that refusal is
    the answer: there was no commit to answer after.
    """

    status: int
    description: str | None = None
    retry_after_s: float | None = None
    after_commit: bool = False

    @classmethod
    def parse(cls, reply: Mapping[str, Any], *, after_commit: bool = False) -> Fault:
        """From a case's ``{"status", "description"?, "retry_after_s"?}``; ``after_commit`` comes from the fault
        object around it.

        Raises:
            ValueError: the status is not an error status (>= 400), a field has the wrong type, or the reply
                carries ``after_commit`` (it belongs to the fault object).
        """
        if "after_commit" in reply:
            raise ValueError("after_commit belongs to the fault object, not to its reply")
        try:
            status = int(reply["status"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"a fault reply needs an integer status, got {reply.get('status')!r}") from None
        if status < 400:
            raise ValueError(f"a fault reply needs an error status (>= 400), got {status}")
        description = reply.get("description")
        if description is not None and not isinstance(description, str):
            raise ValueError(f"a fault's description must be a string, got {description!r}")
        retry = reply.get("retry_after_s")
        if retry is not None and (isinstance(retry, bool) or not isinstance(retry, int | float) or retry < 0):
            raise ValueError(f"a fault's retry_after_s must be a number >= 0, got {retry!r}")
        retry_after_s = float(retry) if retry is not None else (1.0 if status == 429 else None)
        return cls(status, description, retry_after_s, after_commit)


@dataclass(frozen=True)
class RawAnswer:
    """A scripted answer sent byte for byte, in no platform's shape: what a proxy, a load balancer or a platform
    having a bad day may send. ``status`` any HTTP status (200 too); ``body`` the exact text; ``content_type`` the
    ``Content-Type`` header.

    ``after_commit``: the call is stored first, exactly as on success (:class:`Fault`); without it nothing is
    stored. Had the call been refused anyway (validation, rate limits), that refusal is the answer.
    """

    status: int
    body: str
    content_type: str = "application/json"
    after_commit: bool = False

    @classmethod
    def parse(cls, reply: Mapping[str, Any], *, after_commit: bool = False) -> RawAnswer:
        """From a case's ``{"status", "body", "content_type"?}``: a string ``body`` is sent as it is (``""``: an
        empty body), any other JSON value JSON-encoded (``{"ok": true}``); ``content_type`` defaults to
        ``application/json`` (exactly: discord.py decodes only that).

        Raises:
            ValueError: a status outside 100-599, a ``content_type`` that is not a string, an unknown key,
                or ``after_commit`` in the reply (it belongs to the fault object).
        """
        unknown = set(reply) - {"status", "body", "content_type"}
        if unknown:
            raise ValueError(f"a raw reply has status, body and content_type only, not {sorted(unknown)[0]!r}")
        status = reply.get("status")
        if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
            raise ValueError(f"a raw reply needs an HTTP status (100-599), got {status!r}")
        body = reply["body"]
        text = body if isinstance(body, str) else json.dumps(body)
        content_type = reply.get("content_type", "application/json")
        if not isinstance(content_type, str):
            raise ValueError(f"a raw reply's content_type must be a string, got {content_type!r}")
        return cls(status, text, content_type, after_commit)


class RawAnswerError(Exception):
    """Raised by :meth:`mocks.common.MockServer._scripted` to send ``answer`` instead of the platform's own answer;
    the mock's middleware turns it into the HTTP answer."""

    def __init__(self, answer: RawAnswer) -> None:
        super().__init__(f"raw answer {answer.status}")
        self.answer = answer


Answer = Fault | RawAnswer | Hang
"""What a scripted call gets instead of the platform's own answer."""


def parse_answer(reply: Any, *, after_commit: bool = False) -> Answer:
    """A reply in the case format: a :class:`Fault` mapping, a :class:`RawAnswer` mapping (one with ``body``) or a
    :class:`Hang` name.

    ``"reset"`` with ``after_commit`` is :attr:`Hang.RESET_AFTER_COMMIT`; ``"timeout_after_commit"`` with it is
    the same hang.

    Raises:
        ValueError: neither a mapping nor a known name, a bad mapping, or ``after_commit`` with
            ``timeout_before_commit``.
    """
    if isinstance(reply, Mapping):
        if "after_commit" in reply:
            raise ValueError("after_commit belongs to the fault object, not to its reply")
        if "body" in reply:
            return RawAnswer.parse(reply, after_commit=after_commit)
        return Fault.parse(reply, after_commit=after_commit)
    names = ", ".join(h.value for h in (Hang.AFTER_COMMIT, Hang.BEFORE_COMMIT, Hang.RESET))
    if not isinstance(reply, str) or reply not in {h.value for h in Hang}:
        raise ValueError(f"a reply is {{'status': ...}}, {{'status', 'body'}} or one of {names}, got {reply!r}")
    hang = Hang(reply)
    if not after_commit:
        return hang
    if hang is Hang.BEFORE_COMMIT:
        raise ValueError("timeout_before_commit cannot be after_commit")
    return Hang.RESET_AFTER_COMMIT if hang is Hang.RESET else hang


@dataclass(frozen=True)
class Outage:
    """Every call (of ``methods``, or of every method when None) arriving from ``start_s`` until ``until_s``
    (the mock's clock, seconds) gets ``answer``."""

    start_s: float
    until_s: float
    answer: Answer
    methods: frozenset[str] | None = None

    def covers(self, method: str, now_s: float) -> bool:
        return self.start_s <= now_s < self.until_s and (self.methods is None or method in self.methods)


class FaultScript:
    """Scripted faults, latencies and an outage per method, and the per-method call counter.

    Call numbers (``nth``) are absolute here: the n-th call of the method since the last :meth:`reset`
    (every call counts, failed ones too). The control API turns its relative numbers into these.

    Args:
        methods: the method names the mock knows (faults for others are refused).
        hang_s: how long a scripted hang holds its answer (longer than any client timeout).
        clock: monotonic seconds (outage windows).
    """

    def __init__(
        self, methods: Sequence[str], hang_s: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._methods = {m.lower(): m for m in methods}
        self.hang_s = hang_s
        self._clock = clock
        self.reset()

    def reset(self) -> None:
        """Forget faults, latencies, the outage and counts; release every hanging call."""
        release = getattr(self, "_release", None)
        if release is not None:
            release.set()
        self._release = asyncio.Event()
        self._counts: defaultdict[str, int] = defaultdict(int)
        self._faults: dict[tuple[str, int], Answer] = {}
        self._latency_ms: dict[str, tuple[int, list[float]]] = {}
        self.outage: Outage | None = None

    @property
    def methods(self) -> list[str]:
        """The known method names, sorted."""
        return sorted(self._methods.values())

    def method(self, name: str) -> str | None:
        """The canonical spelling of a known method (case-insensitive), or None."""
        return self._methods.get(name.lower())

    def _known(self, name: str) -> str:
        method = self.method(name) if isinstance(name, str) else None
        if method is None:
            raise ValueError(f"unknown method {name!r} (known methods: {', '.join(self.methods)})")
        return method

    def count(self, method: str) -> int:
        """How many calls of ``method`` arrived since the last reset."""
        return self._counts[self._known(method)]

    def scripted(self, method: str, nth: int) -> bool:
        """Whether call ``nth`` (absolute) of ``method`` (a canonical name) already has a fault."""
        return (method, nth) in self._faults

    def add_fault(self, method: str, nth: int, reply: Mapping[str, Any] | str, *, after_commit: bool = False) -> None:
        """Script the answer to the ``nth`` (1-based, absolute) call of ``method``: a :class:`Fault` or
        :class:`RawAnswer` mapping or a :class:`Hang` name; ``after_commit`` stores the call first (:class:`Fault`).

        Raises:
            ValueError: unknown method, ``nth`` < 1, a bad reply, or that call is already scripted.
        """
        name = self._known(method)
        if isinstance(nth, bool) or not isinstance(nth, int) or nth < 1:
            raise ValueError(f"bad fault: nth must be an integer >= 1, got {nth!r} (known methods: {name})")
        if (name, nth) in self._faults:
            raise ValueError(f"call {nth} of {name} already has a fault")
        self._faults[(name, nth)] = parse_answer(reply, after_commit=after_commit)

    def set_latency(self, method: str, delays_ms: Sequence[float], *, after: int = 0) -> None:
        """Call ``after + k`` of ``method`` waits ``delays_ms[k-1]`` ms first (none past the list); replaces the
        method's earlier latencies.

        Raises:
            ValueError: unknown method, or a delay that is not a number >= 0.
        """
        name = self._known(method)
        if isinstance(delays_ms, str | bytes) or not isinstance(delays_ms, Sequence):
            raise ValueError(f"latencies of {name} must be a list of milliseconds, got {delays_ms!r}")
        for ms in delays_ms:
            if isinstance(ms, bool) or not isinstance(ms, int | float) or ms < 0:
                raise ValueError(f"a latency of {name} must be a number of milliseconds >= 0, got {ms!r}")
        self._latency_ms[name] = (after, [float(ms) for ms in delays_ms])

    def set_outage(
        self, seconds: float, reply: Mapping[str, Any] | str, methods: Collection[str] | None = None
    ) -> Outage:
        """From now on, for ``seconds``, every call (of ``methods``, else of every method) gets ``reply``
        (replaces an earlier outage). During an outage the calls are still counted, and a call's own scripted
        fault is overridden by the outage.

        Raises:
            ValueError: ``seconds`` not a positive number, a bad reply, or an unknown method.
        """
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
            raise ValueError(f"an outage lasts a positive number of seconds, got {seconds!r}")
        answer = parse_answer(reply)
        names = frozenset(self._known(m) for m in methods) if methods is not None else None
        now = self._clock()
        self.outage = Outage(now, now + float(seconds), answer, names)
        return self.outage

    def configure_from_case(self, case: Mapping[str, Any]) -> None:
        """Apply a case's ``faults`` (with their ``after_commit``) and ``latency_ms``.

        Raises:
            ValueError: a bad fault or latency.
        """
        for fault in case.get("faults", []):
            after_commit = fault.get("after_commit", False)
            if not isinstance(after_commit, bool):
                raise ValueError(f"a fault's after_commit must be true or false, got {after_commit!r}")
            self.add_fault(fault["method"], int(fault["nth"]), fault["reply"], after_commit=after_commit)
        for method, delays in case.get("latency_ms", {}).items():
            self.set_latency(method, delays)

    async def begin(self, method: str) -> Answer | None:
        """Count one call of ``method`` (a canonical name), wait its scripted latency; return what it gets
        instead of the platform's answer (the outage's, else its own scripted fault), if anything."""
        self._counts[method] += 1
        nth = self._counts[method]
        outage = self.outage if self.outage is not None and self.outage.covers(method, self._clock()) else None
        after, delays = self._latency_ms.get(method, (0, []))
        if 0 < nth - after <= len(delays):
            await self.wait(delays[nth - after - 1] / 1000)
        return outage.answer if outage is not None else self._faults.get((method, nth))

    async def wait(self, seconds: float) -> None:
        """Sleep ``seconds``, cut short by :meth:`reset` (so a stopping mock never hangs)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._release.wait(), seconds)

    async def hang(self, call: RecordedCall, kind: Hang) -> None:
        """Hold a call's answer for ``hang_s`` (the client gives up first)."""
        call.description = kind.value
        await self.wait(self.hang_s)
