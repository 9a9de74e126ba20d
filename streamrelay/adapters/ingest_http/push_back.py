"""Ingest's push-back past capacity (:class:`core.ingest.pressure.Pressure`): which lines of a batch are still taken,
and
the answer that tells the agent when to send the rest.

While the event loop lags past ``[service] overload_lag_ms`` a request's ``run.start`` of a new run and everything
after it is pushed back (a resent start of a run this process knows, active or ended, is no new run: it passes);
past twice that, every line but a run's ``end`` (a run must always be able to end, freeing its slot).
A request is cut at its first pushed-back line and not read further: the lines before it are taken (or refused for
their own reasons) as always, none after it is looked at, so an agent that sends the rest again (after
``Retry-After``) loses nothing and repeats nothing. An ``end`` after a pushed-back line is pushed back with it:
taking it would end the run without the text before it.

The answer: 503 with ``Retry-After: <seconds>`` (drawn at random from ``overload_retry_after_s`` up to four times it,
so agents pushed back together come back spread out) and ``{"error", "accepted", "pushed_back_from": N, "dropped"?,
"rejected"?}``: N is the first line not taken, counting every line of the body from 1 (blank ones too).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from starlette.responses import JSONResponse

from streamrelay.adapters.ingest_http.lines import Tally
from streamrelay.core.ingest.pressure import Pressure, PushBack


def _kind_is(raw: bytes, kind: bytes) -> bool:
    """Whether the line is a normalized event of ``kind`` (a cheap byte test first; JSON only when it may be: the
    kind written plainly, or any ``\\u`` escape, which may spell it)."""
    if b'"' + kind + b'"' not in raw and b"\\u" not in raw:
        return False
    try:
        obj = json.loads(raw)
    except ValueError:
        return False
    return isinstance(obj, dict) and obj.get("kind") == kind.decode()


def cut_at(batch: Sequence[bytes], level: PushBack, known: Callable[[bytes], bool] | None = None) -> int | None:
    """The index of the batch's first pushed-back line at ``level``, or None when every line is taken.

    ``known(raw)``: whether a ``run.start`` line starts a run this process already knows (active or ended): its
    agent resending it is not a new run, and the line is acknowledged (dropped or taken) as always, never pushed
    back at :attr:`PushBack.STARTS`."""
    if level is PushBack.NONE:
        return None
    for index, raw in enumerate(batch):
        if not raw.strip():
            continue
        if level is PushBack.STARTS:
            if _kind_is(raw, b"run.start") and not (known is not None and known(raw)):
                return index
        elif not _kind_is(raw, b"end"):
            return index
    return None


def answer(tally: Tally, first_line: int, pressure: Pressure, level: PushBack) -> JSONResponse:
    """The 503 for a request pushed back at ``level`` from its line ``first_line`` (module docstring)."""
    lag_ms = pressure.lag.now_s() * 1000
    body: dict[str, Any] = {
        "error": (
            f"the sidecar is over capacity (its event loop lags {lag_ms:.0f} ms, past [service] overload_lag_ms = "
            f"{pressure.max_lag_s * 1000:g}): the lines from line {first_line} on were not taken; send them "
            "again after Retry-After seconds"
        ),
        **tally.counts(),
        "pushed_back_from": first_line,
    }
    if tally.rejected:
        body["rejected"] = tally.rejected
    retry_after_s = max(pressure.retry_after(level), tally.retry_after_s or 0.0)
    pressure.pushed_back += 1
    headers = {"Retry-After": str(max(1, math.ceil(retry_after_s)))}
    return JSONResponse(body, status_code=503, headers=headers)
