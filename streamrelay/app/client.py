"""A small Python client of the sidecar, for the parent loop: stream events in, act on the pipeline lane.

The parent loop streams its run (and its sub-agents' events, each with its ``source``) into the sidecar,
follows the run's pipeline lane, and asks the action gate before running a tool call::

    async with RelayClient("http://127.0.0.1:8787", token) as relay:
        await relay.start("r1", channel="telegram", chat_id=42)
        await relay.send("r1", [{"kind": "text", "text": "Looking it up…"}])
        async for unit in relay.pipeline("r1"):          # complete, checked units only; ends at run.end
            match unit:
                case ToolCallUnit(id=call_id):
                    decision = await relay.gate("r1", call_id, wait_s=30)
                    if decision.verdict == "run":
                        ...                              # run the tool

Answers are the typed contracts of :mod:`core.contracts` (frozen pydantic models: pipeline units, live events,
the run report, the gate's answer), so mypy checks a parent loop's field names. Every method raises
:class:`RelayError` (with the sidecar's status and message) when the sidecar refuses, and
``pydantic.ValidationError`` when an answer is not of the contract (a sidecar of another version).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx
from opentelemetry import propagate

from streamrelay.app.ingest_client import KEEPALIVE_S, recording_lines
from streamrelay.core.contracts.answers import GateAnswer, RunListing, StopAnswer, WatchLink
from streamrelay.core.contracts.live import LIVE_EVENT, EndLiveEvent, LiveEvent
from streamrelay.core.contracts.report import RunReport
from streamrelay.core.contracts.units import PIPELINE_UNIT, ApprovalUnit, PipelineUnit, RunEndUnit, parse_unit
from streamrelay.core.events import Event, ProviderFormat, Source, event_to_json
from streamrelay.core.normalize import make_normalizer


class RelayError(RuntimeError):
    """The sidecar refused a request. ``status`` is its HTTP status; the message is its answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"the sidecar answered {status}: {message}")
        self.status = status
        self.message = message
        """The answer's own words (a refused approval press: what to tell the person)."""


async def _send_trace_context(request: httpx.Request) -> None:
    """httpx request hook: the caller's current OpenTelemetry context as W3C ``traceparent`` / ``tracestate``
    headers (the globally configured propagator; nothing when no span is current), so the runs a traced agent starts
    are traced into its span (docs/tracing.md)."""
    propagate.inject(request.headers)


class RelayClient:
    """An HTTP client of one sidecar (httpx). Each request carries the caller's current OpenTelemetry trace context
    (W3C ``traceparent``; https://www.w3.org/TR/trace-context/): a run started inside an agent's span is traced from
    that span to each platform call (docs/tracing.md).

    Args:
        url: the sidecar's base URL.
        token: its bearer token (never in reprs or errors).
        timeout_s: seconds a plain request may take (streams wait as long as the run lasts).
        reconnects: how many times :meth:`pipeline` reconnects after a dropped stream (resuming after the
            last unit it got, so nothing is seen twice).
        push_back_s: how long :meth:`send` keeps sending again what a sidecar past its capacity pushed back
            (``Retry-After`` apart), in seconds.
    """

    def __init__(
        self, url: str, token: str, *, timeout_s: float = 30.0, reconnects: int = 5, push_back_s: float = 300.0
    ) -> None:
        self.url = url
        self.push_back_s = push_back_s
        self.reconnects = reconnects
        self._http = httpx.AsyncClient(
            base_url=url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(timeout_s),
            event_hooks={"request": [_send_trace_context]},
        )

    def __repr__(self) -> str:
        return f"RelayClient(url={self.url!r})"

    async def __aenter__(self) -> RelayClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def start(
        self,
        run: str,
        *,
        channel: str,
        chat_id: int | str,
        thread_id: int | str | None = None,
        reply_to: int | str | None = None,
        mode: str | None = None,
        overrides: Mapping[str, Any] | None = None,
        format: str | None = None,
    ) -> None:
        """Send the run's ``run.start``.

        Args:
            run: the run's id (yours: one per user request).
            channel: a configured channel's name.
            chat_id: the chat (Telegram chat id, Slack channel id, Discord channel id).
            thread_id: a thread or topic in it (Slack: the parent message's ``ts``).
            reply_to: the message the answer replies to (its platform id).
            mode: the delivery mode, else the channel's.
            overrides: per-run channel settings (``throttle_ms``, ``subagents``, ``reasoning``...).
            format: the provider stream the run's later lines are (``anthropic``, ``openai-chat``,
                ``openai-responses``, ``gemini``...): send its events as they are, then an ``end``.
        """
        target: dict[str, Any] = {"chat_id": chat_id}
        if thread_id is not None:
            target["thread_id"] = thread_id
        if reply_to is not None:
            target["reply_to"] = reply_to
        start: dict[str, Any] = {"kind": "run.start", "channel": channel, "target": target}
        if mode is not None:
            start["mode"] = mode
        if format is not None:
            start["format"] = format
        if overrides:
            start["overrides"] = dict(overrides)
        await self.send(run, [start])

    async def send(self, run: str, events: Iterable[Mapping[str, Any] | Event]) -> int:
        """Post events of ``run`` as one NDJSON request; return how many the sidecar took.

        A sidecar past its capacity pushes back (503 with ``Retry-After`` and ``pushed_back_from``, the first line it
        did not take): the rest is sent again after ``Retry-After`` seconds, for up to ``push_back_s`` seconds in
        all. A refused start (429 or 503 with ``Retry-After``: too many active runs) is sent again the same way.

        Raises:
            RelayError: a line was refused (the others were taken: the error lists the refused lines), or the
                sidecar still pushed back after ``push_back_s``.
        """
        lines = [json.dumps(e if isinstance(e, Mapping) else event_to_json(e), ensure_ascii=False) for e in events]
        return await self._send_lines(run, lines)

    async def _send_lines(
        self, run: str, lines: list[str], first: httpx.Response | None = None, tally: _Taken | None = None
    ) -> int:
        """:meth:`send`'s loop over NDJSON ``lines`` (``first``: the answer ``lines`` already got, e.g. a
        :class:`RunStream`'s long request; ``tally``: what earlier requests of the same stream took and refused); the
        lines taken. Raises as :meth:`send`."""
        tally = tally if tally is not None else _Taken()
        deadline = time.monotonic() + self.push_back_s
        answer = first
        while True:
            if answer is None:
                answer = await self._http.post(
                    _path(run, "/events"),
                    content=("\n".join(lines) + "\n").encode(),
                    headers={"Content-Type": "application/x-ndjson"},
                )
            rest = _pushed_back(answer, lines)
            if rest is None or time.monotonic() >= deadline:
                body = _json(answer)
                tally.raise_refused()
                return tally.accepted + int(body.get("accepted", 0))
            tally.count(answer, len(lines) - len(rest))
            lines = rest
            delay_s = float(answer.headers.get("retry-after", "1"))
            await asyncio.sleep(min(delay_s, max(0.0, deadline - time.monotonic())))
            answer = None

    def stream(self, run: str, *, keepalive_s: float = KEEPALIVE_S) -> RunStream:
        """One long request that carries ``run``'s events as the agent produces them (the agent mode of
        docs/ingest.md): ``async with relay.stream("r1") as stream: await stream.send([...])``; the request ends
        when the block does. While nothing is sent for ``keepalive_s`` seconds (a tool call, a slow model) the body
        gets an empty line, a keep-alive the sidecar skips: a body silent for the sidecar's
        ``[service.connections] body_idle_timeout_s`` (120 s by default) is cut.
        """
        return RunStream(self, run, keepalive_s)

    async def units(self, run: str, *, after: int = 0) -> list[PipelineUnit]:
        """The run's pipeline units after position ``after`` so far (without waiting), typed."""
        answer = await self._http.get(_path(run, "/pipeline"), params={"after": after})
        return [parse_unit(unit) for unit in _json(answer)["units"]]

    async def pipeline(self, run: str, *, after: int = 0) -> AsyncIterator[PipelineUnit]:
        """The run's pipeline units after position ``after``, as they come, until ``run.end`` (included).

        A dropped connection is resumed after the last unit received (at most ``reconnects`` times in a row).
        """
        failures = 0
        while True:
            try:
                async with self._http.stream(
                    "GET", _path(run, "/pipeline/stream"), params={"after": after}, timeout=None
                ) as answer:
                    if answer.status_code != 200:
                        await answer.aread()
                        _json(answer)
                    async for line in answer.aiter_lines():
                        if not line.strip():
                            continue  # keepalive
                        unit = PIPELINE_UNIT.validate_json(line)
                        after = unit.index
                        failures = 0
                        yield unit
                        if isinstance(unit, RunEndUnit):
                            return
            except (httpx.TransportError, httpx.RemoteProtocolError):
                failures += 1
                if failures > self.reconnects:
                    raise

    async def gate(self, run: str, call_id: str, *, source: str | None = None, wait_s: float = 0.0) -> GateAnswer:
        """Ask the action gate whether tool call ``call_id`` may run now.

        Returns:
            its ``verdict`` (run, wait, refuse), ``reason``, ``action_class``, ``compensation`` and ``unit``.
        """
        body: dict[str, Any] = {"id": call_id, "wait_s": wait_s}
        if source is not None:
            body["source"] = source
        answer = await self._http.post(_path(run, "/gate"), json=body, timeout=wait_s + 30)
        return GateAnswer.model_validate(_json(answer))

    async def stop(self, run: str, *, by: str | None = None, reason: str | None = None) -> StopAnswer:
        """Stop run ``run`` for its reader (``POST /v1/runs/{run}/stop``; ``run`` may be a Stop control's 16 hex):
        it ends ``cancelled``, its pipeline lane gets a ``stop`` unit, its agent's later lines get a 409.

        Returns:
            its ``run``, ``state`` (stopping, stopped), ``by`` and ``reason`` (a second stop answers the first's).

        Raises:
            RelayError: 404 an unknown run, 409 one that ended otherwise, 400 a bad ``by`` / ``reason``.
        """
        body = {key: value for key, value in (("by", by), ("reason", reason)) if value is not None}
        return StopAnswer.model_validate(_json(await self._http.post(_path(run, "/stop"), json=body)))

    async def decide_approval(self, run: str, approval: str, decision: str, *, by: str) -> dict[str, Any]:
        """Forward a person's Approve or Deny press (``POST /v1/runs/{run}/approvals/{approval}``; ``run`` and
        ``approval`` may be the two 16 hex of the button's id ``approve:<run16>:<id16>``): ``decision`` is
        ``approve`` or ``deny``, ``by`` who pressed (``telegram:user:123``).

        Returns:
            the decided approval: ``run``, ``id``, ``state``, ``decision`` (approved, denied or expired: pressed too
            late), ``approved``, ``by``, ``at``, ``expires_at``.

        Raises:
            RelayError: 403 ``by`` may not decide (its message is what to tell the person), 409 decided already or
                the run ended (the message says which), 404 unknown run or approval, 400 a bad body.
        """
        path = _path(run, f"/approvals/{quote(approval, safe='')}")
        answer = await self._http.post(path, json={"decision": decision, "by": by})
        if answer.status_code in (403, 409):
            body = answer.json()
            raise RelayError(answer.status_code, str(body.get("tell") or body.get("error")))
        return _json(answer)

    async def wait_approval(self, run: str, approval: str, *, after: int = 0) -> ApprovalUnit:
        """Wait until approval ``approval`` of run ``run`` is decided: its ``approval`` unit on the run's pipeline
        lane (approved, denied or expired; ``approved`` says whether to go on), read from position ``after``.

        Raises:
            RelayError: 409 the run ended (``run.end``) without deciding it.
        """
        async for unit in self.pipeline(run, after=after):
            if isinstance(unit, ApprovalUnit) and unit.id == approval:
                return unit
        raise RelayError(409, f"run {run!r} ended before approval {approval!r} was decided")

    async def forward_whatsapp_webhook(self, body: bytes, signature: str | None) -> int:
        """Forward a WhatsApp Cloud API webhook the bot received to the sidecar (``POST
        /v1/platforms/whatsapp/webhook``), for a bot that owns the Meta app's webhook URL: its status webhooks settle
        the sidecar's uncertain sends (docs/platforms.md, WhatsApp). ``body`` is the request's raw body, byte for
        byte, and ``signature`` its ``X-Hub-Signature-256`` header: the sidecar checks it with the same app secret
        (``WHATSAPP_APP_SECRET``), so a forward can be neither forged nor altered on the way. Forward every POST
        (the sidecar keeps the ``statuses`` whose ``biz_opaque_callback_data`` it set and skips the rest); answer
        Meta 200 only once this returns, so a failed forward is delivered again by Meta.

        Returns:
            how many statuses the sidecar recorded.

        Raises:
            RelayError: 401 the signature does not match (the bot's and the sidecar's app secrets differ, or the body
                was changed: forward the raw bytes), 404 the sidecar serves no WhatsApp webhook (no
                ``WHATSAPP_APP_SECRET`` in its environment), 500 it could not record them (send again).
        """
        headers = {"Content-Type": "application/json"}
        if signature is not None:
            headers["X-Hub-Signature-256"] = signature
        answer = await self._http.post("/v1/platforms/whatsapp/webhook", content=body, headers=headers)
        recorded = _json(answer).get("recorded", 0)
        return int(recorded) if isinstance(recorded, int) else 0

    async def correct(
        self, run: str, correction_id: str, text: str, *, by: str | None = None, retries: int = 3
    ) -> dict[str, Any]:
        """Correct ended run ``run``'s answer to ``text`` (``POST /v1/runs/{run}/corrections``, a ``run.correct``;
        docs/corrections.md): each of its messages edited (or deleted, or sent) once. ``correction_id`` names it: the
        same id sent again is the same correction, applied once, so a retry is safe. A 503 (a message could not be
        changed yet) is sent again after its ``Retry-After``, ``retries`` times.

        Returns:
            the correction: ``id``, ``run``, ``kind``, ``state`` (``applied``, or ``partial``: a step uncertain or
            refused), ``fallback`` (``reply``: posted as a reply where the messages cannot be edited), ``before``
            and ``after`` (the answer's message ids), ``steps`` (per message: ``op``, ``message_id``, ``state``,
            ``outcome``).

        Raises:
            RelayError: 404 unknown run, 409 not ended / no answer message / retracted / the id taken by another
                correction, 400 a bad text or id, 503 still not done after the retries, 501 not served (replicas).
        """
        body = {"kind": "run.correct", "id": correction_id, "text": text, **({"by": by} if by else {})}
        return await self._correction(run, body, retries)

    async def retract(
        self, run: str, correction_id: str, *, reason: str | None = None, by: str | None = None, retries: int = 3
    ) -> dict[str, Any]:
        """Withdraw ended run ``run``'s answer (a ``run.retract``): each message deleted once (edited to a
        "retracted" line where it cannot be deleted; a notice replying to it where it cannot be edited either).
        Returns and raises as :meth:`correct`."""
        body: dict[str, Any] = {"kind": "run.retract", "id": correction_id}
        if reason:
            body["reason"] = reason
        if by:
            body["by"] = by
        return await self._correction(run, body, retries)

    async def _correction(self, run: str, body: dict[str, Any], retries: int) -> dict[str, Any]:
        for attempt in range(retries + 1):
            answer = await self._http.post(_path(run, "/corrections"), json=body)
            if answer.status_code != 503 or attempt == retries:
                return _json(answer)
            await asyncio.sleep(min(30.0, float(answer.headers.get("Retry-After", "1") or 1)))
        raise AssertionError("unreachable")  # pragma: no cover

    async def corrections(self, run: str) -> list[dict[str, Any]]:
        """Run ``run``'s corrections and retractions, oldest first (``GET /v1/runs/{run}/corrections``)."""
        found = _json(await self._http.get(_path(run, "/corrections")))["corrections"]
        return list(found)

    async def report(self, run: str, *, wait_s: float = 0.0) -> RunReport:
        """The run's delivery report (waiting up to ``wait_s`` for the run to finish)."""
        answer = await self._http.get(_path(run), params={"wait_s": wait_s}, timeout=wait_s + 30)
        return RunReport.model_validate(_json(answer))

    async def runs(self, *, everywhere: bool = False) -> RunListing:
        """The caller's active runs, oldest first (``GET /v1/runs``; ``everywhere``: every replica's, with the ones
        that could not be asked in ``unreachable``)."""
        answer = await self._http.get("/v1/runs", params={"all": "1"} if everywhere else None)
        return RunListing.model_validate(_json(answer))

    async def watch_link(self, run: str) -> WatchLink:
        """The run's live page link and its read token (``GET /v1/runs/{run}/watch``), also before it starts.

        Raises:
            RelayError: 404 when the sidecar serves no live page (or the run is not the caller's).
        """
        return WatchLink.model_validate(_json(await self._http.get(_path(run, "/watch"))))

    async def watch(self, run: str) -> AsyncIterator[LiveEvent]:
        """The run's live events (``GET /v1/runs/{run}/live``, SSE, with the run's read token), typed, until its
        ``end`` (included); a ``waiting`` event first when it has not started. A dropped stream, or one that ends
        while the run has not started, is resumed with ``Last-Event-ID`` (at most ``reconnects`` times in a row).
        """
        token = (await self.watch_link(run)).token
        last_id: str | None = None
        failures = 0
        while True:
            headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            try:
                async with self._http.stream("GET", _path(run, "/live"), headers=headers, timeout=None) as answer:
                    if answer.status_code != 200:
                        await answer.aread()
                        _json(answer)
                    async for sse_id, data in _sse_messages(answer):
                        event = LIVE_EVENT.validate_json(data)
                        last_id = sse_id or last_id
                        failures = 0 if sse_id else failures
                        yield event
                        if isinstance(event, EndLiveEvent):
                            return
            except (httpx.TransportError, httpx.RemoteProtocolError):
                pass
            failures += 1
            if failures > self.reconnects:
                raise RelayError(504, f"the live stream of run {run!r} ended {failures} times without its end")


class RunStream:
    """One long NDJSON request of a run (:meth:`RelayClient.stream`): lines go out as :meth:`send` gives them, an
    empty line (a keep-alive) after each ``keepalive_s`` seconds of silence, and the sidecar answers when the block
    ends. A sidecar past its capacity may cut the request partway (503 with ``Retry-After`` and ``pushed_back_from``,
    the first line of the request it did not take, keep-alives counted as the sidecar counts them): the lines from
    there on are sent again after the request, as :meth:`RelayClient.send` does; :attr:`accepted` is then the events
    the sidecar took. (HTTP/1.1 as httpx speaks it reads an answer only once the request's body is sent, so a stream
    cut partway learns it when its block ends; until then its lines go to a sidecar that no longer reads them.)

    Raises (on leaving the block):
        RelayError: a line was refused (the others were taken), or the sidecar still pushed back after
            ``push_back_s``. :meth:`send` raises it at once when the sidecar answered otherwise (e.g. 401, 413).
    """

    def __init__(self, client: RelayClient, run: str, keepalive_s: float) -> None:
        self._client = client
        self.run = run
        self.keepalive_s = keepalive_s
        self.accepted = 0
        self._taken = _Taken()
        self._lines: list[str] = []  # the lines given to the open request, in order
        self._body: list[str] = []  # what its body carried so far, a keep-alive as "" (the sidecar numbers those too)
        self._carried = 0  # how many of _lines the body carried
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._post: asyncio.Task[httpx.Response] | None = None

    def __repr__(self) -> str:
        return f"RunStream(run={self.run!r}, lines={len(self._lines)})"

    async def __aenter__(self) -> RunStream:
        headers = {"Content-Type": "application/x-ndjson"}
        post = self._client._http.post(
            _path(self.run, "/events"), content=self._body_pieces(self._queue), headers=headers, timeout=None
        )
        self._post = asyncio.create_task(post)
        return self

    def _put(self, lines: list[str]) -> None:
        self._lines.extend(lines)
        for line in lines:
            self._queue.put_nowait(line)

    def _request_lines(self) -> list[str]:
        """The open request's lines as the sidecar numbers them: those its body carried (keep-alives as ""), then
        those still queued (a cut request never carried them)."""
        return self._body + self._lines[self._carried :]

    async def send(self, events: Iterable[Mapping[str, Any] | Event]) -> None:
        """Send ``events`` on the open request (queued: they go out as the connection takes them).

        Raises:
            RelayError: the sidecar already answered the request (it ends it: nothing more is read).
        """
        if self._post is None:
            raise RuntimeError("send inside `async with relay.stream(run) as stream:`")
        if self._post.done():
            _json(self._post.result())  # the answer that ended it (a 4xx, a 503): raised as RelayError
            raise RelayError(200, "the sidecar already answered this stream: start another")
        self._put(
            [
                json.dumps(event if isinstance(event, Mapping) else event_to_json(event), ensure_ascii=False)
                for event in events
            ]
        )

    async def _body_pieces(self, queue: asyncio.Queue[str | None]) -> AsyncIterator[bytes]:
        while True:
            try:
                line = await asyncio.wait_for(queue.get(), self.keepalive_s)
            except TimeoutError:
                self._body.append("")
                yield b"\n"  # a keep-alive: the sidecar skips an empty line
                continue
            if line is None:
                return
            self._body.append(line)
            self._carried += 1
            yield (line + "\n").encode()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._post is not None
        self._queue.put_nowait(None)
        if exc_type is not None:
            self._post.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # the block's own error is raised
                await self._post
            return
        # A push-back's rest is sent again as send does (its refused lines raise, its wait bounded by push_back_s).
        answer = await self._post
        self.accepted = await self._client._send_lines(self.run, self._request_lines(), first=answer, tally=self._taken)


class _Taken:
    """What the requests of one send or stream took and refused so far (lines numbered over them all)."""

    def __init__(self) -> None:
        self.accepted = 0
        self.refused: list[str] = []
        self._numbered = 0  # lines of earlier requests, to number a refused line from the first one given

    def count(self, answer: httpx.Response, done: int) -> int:
        """Count a push-back ``answer`` whose request's first ``done`` lines were read (taken or refused); the
        events it took."""
        try:
            body = answer.json()
        except json.JSONDecodeError:
            body = {}
        took = int(body.get("accepted", 0)) if isinstance(body, dict) else 0
        self.accepted += took
        for line in body.get("rejected", []) if isinstance(body, dict) else []:
            self.refused.append(f"line {self._numbered + int(line['line'])}: {line['error']}")
        self._numbered += done
        return took

    def raise_refused(self) -> None:
        """Raises RelayError (422) listing the refused lines, if any."""
        if self.refused:
            raise RelayError(422, "lines refused (the others were taken): " + "; ".join(self.refused))


def _path(run: str, tail: str = "") -> str:
    """``/v1/runs/<run><tail>`` with the run id percent-encoded: a valid run id may hold ``?``, ``#`` or ``%``, which
    would otherwise address another run (https://www.rfc-editor.org/rfc/rfc3986#section-3.3)."""
    return f"/v1/runs/{quote(run, safe='')}{tail}"


def _pushed_back(answer: httpx.Response, lines: list[str]) -> list[str] | None:
    """The lines to send again after ``Retry-After`` (those from ``pushed_back_from``; the one start a 429 or 503
    refused), or None when the answer is final."""
    if answer.status_code not in (429, 503) or "retry-after" not in answer.headers:
        return None
    try:
        body = answer.json()
    except json.JSONDecodeError:
        return None
    first = body.get("pushed_back_from") if isinstance(body, dict) else None
    if isinstance(first, int) and 1 <= first <= len(lines):
        return lines[first - 1 :]
    if len(lines) == 1 and not body.get("accepted"):  # a start refused for the moment (too many active runs)
        return lines
    return None


async def _sse_messages(answer: httpx.Response) -> AsyncIterator[tuple[str | None, str]]:
    """The ``(id, data)`` of each Server-Sent Events message of ``answer`` (comments and keepalives skipped;
    several ``data`` lines joined by newlines), as
    https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation reads them."""
    sse_id: str | None = None
    data: list[str] = []
    async for line in answer.aiter_lines():
        if not line:
            if data:
                yield sse_id, "\n".join(data)
            sse_id, data = None, []
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field == "id":
            sse_id = value
    if data:
        yield sse_id, "\n".join(data)


def _json(answer: httpx.Response) -> dict[str, Any]:
    try:
        body = answer.json()
    except json.JSONDecodeError:
        body = {"error": answer.text}
    if answer.status_code != 200:
        raise RelayError(answer.status_code, str(body.get("error", body)))
    if not isinstance(body, dict):
        raise RelayError(answer.status_code, f"expected a JSON object, got {body!r}")
    return body


def recorded_events(path: Path, fmt: ProviderFormat, run: str, source: Source | None = None) -> list[dict[str, Any]]:
    """A recorded stream (tests/streams/) as normalized events of ``run``, the recording's root agent's with
    ``source`` (None: the root agent) and its own sub-agents' under it, ready for :meth:`RelayClient.send`. Used
    to replay sub-agents: a run declares one ``format``, so a child's stream is normalized here and sent with its
    source.

    Raises:
        ValueError: a line is not JSON (names the line); core.errors.IngestError: not that provider's format.
    """
    normalizer = make_normalizer(fmt, run)
    events = [e for raw in recording_lines(path) for e in normalizer.feed(raw)]
    events.extend(normalizer.close())
    return [event_to_json(e.model_copy(update={"source": _nested(source, e.source)})) for e in events]


def _nested(source: Source | None, own: Source | None) -> Source | None:
    """An event's source once its recording is replayed as ``source``: the recording's root is ``source``; a
    sub-agent of the recording (AG-UI, A2A) keeps its own source, one level under ``source`` when one is given."""
    if own is None or source is None:
        return source if own is None else own
    rest = own.path.split("/", 1)[1] if own.path and "/" in own.path else own.agent_id
    parent = own.parent_session_id if own.depth > 1 else source.session_id
    path = f"{source.path or source.key}/{rest}"
    return own.model_copy(update={"depth": source.depth + own.depth, "path": path, "parent_session_id": parent})
