"""Checks of a scenario case's ``expect`` against its transcript (tests/cases/README.md).

Each check returns failure messages (empty when it holds), phrased for a person reading a test log.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from streamrelay.core.text.chunk_checks import content_key, fences_balanced
from streamrelay.core.units import LengthUnit, text_units

Transcript = dict[str, Any]


def contains_phrase(text: str, phrase: str) -> bool:
    """True when ``phrase`` occurs in ``text`` as a phrase: not glued to a letter or digit on either side.

    ``never_contains`` uses this so that a forbidden draft ("4 days") is not confused with a longer word
    or number of the right answer ("14 days"). Letters and digits are Unicode ones ("día" is not found in
    "mediodía"); a phrase that starts or ends with another character (a space, punctuation) matches there as
    is; an empty phrase is never found.
    """
    if not phrase:
        return False
    pattern = (r"(?<![^\W_])" if phrase[:1].isalnum() else "") + re.escape(phrase)
    pattern += r"(?![^\W_])" if phrase[-1:].isalnum() else ""
    return re.search(pattern, text) is not None


def _texts(t: Transcript) -> list[str]:
    return [m["text"] for m in t["chat"]]


def _check_chat(want: list[str], t: Transcript, ctx: dict[str, Any]) -> list[str]:
    got = _texts(t)
    return [] if got == want else [f"chat shows {got!r}, expected {want!r}"]


def _check_content(want: str, t: Transcript, ctx: dict[str, Any]) -> list[str]:
    got = content_key("\n".join(_texts(t)))
    exp = content_key(want)
    if got == exp:
        return []
    n = next((i for i, (a, b) in enumerate(zip(got, exp, strict=False)) if a != b), min(len(got), len(exp)))
    return [
        f"content differs at non-whitespace char {n} (got {len(got)} chars, expected {len(exp)}): "
        f"got ...{got[max(0, n - 30) : n + 30]!r}, expected ...{exp[max(0, n - 30) : n + 30]!r}"
    ]


def _check_last(want: str, t: Transcript, ctx: dict[str, Any]) -> list[str]:
    got = _texts(t)
    last = got[-1] if got else None
    return [] if last == want else [f"last message is {last!r}, expected {want!r}"]


def _check_max_messages(n: int, t: Transcript, ctx: dict[str, Any]) -> list[str]:
    got = len(t["chat"])
    return [] if got <= n else [f"{got} visible messages, at most {n} expected"]


def _check_min_messages(n: int, t: Transcript, ctx: dict[str, Any]) -> list[str]:
    got = len(t["chat"])
    return [] if got >= n else [f"{got} visible messages, at least {n} expected"]


def _check_within_limit(flag: bool, t: Transcript, ctx: dict[str, Any]) -> list[str]:
    if not flag:
        return []
    limit, unit = ctx["limit"], LengthUnit(ctx["unit"])
    return [
        f"{c['method']} text of {text_units(c['text'], unit)} {unit} units exceeds the limit {limit}"
        for c in t["calls"]
        if c.get("text") is not None and text_units(c["text"], unit) > limit
    ]


def _check_fences(flag: bool, t: Transcript, ctx: dict[str, Any]) -> list[str]:
    if not flag:
        return []
    return [
        f"message {m['message_id']} leaves a fence open: {m['text'][:80]!r}..."
        for m in t["chat"]
        if not fences_balanced(m["text"])
    ]


def _check_max_calls(limits: dict[str, int], t: Transcript, ctx: dict[str, Any]) -> list[str]:
    counts = Counter(c["method"] for c in t["calls"])
    return [f"{m} called {counts[m]} times, at most {n} expected" for m, n in limits.items() if counts[m] > n]


def _check_min_calls(limits: dict[str, int], t: Transcript, ctx: dict[str, Any]) -> list[str]:
    counts = Counter(c["method"] for c in t["calls"])
    return [f"{m} called {counts[m]} times, at least {n} expected" for m, n in limits.items() if counts[m] < n]


def _check_calls(want: list[list[str]], t: Transcript, ctx: dict[str, Any]) -> list[str]:
    got = [[c["method"], c.get("text")] for c in t["calls"]]
    return [] if got == want else [f"calls were {got!r}, expected {want!r}"]


def _check_never_contains(phrases: list[str], t: Transcript, ctx: dict[str, Any]) -> list[str]:
    return [
        f"{c['method']} text contains {p!r}: {c['text'][:120]!r}"
        for c in t["calls"]
        for p in phrases
        if c.get("text") and contains_phrase(c["text"], p)
    ]


def _check_quiet_after_429(flag: bool, t: Transcript, ctx: dict[str, Any]) -> list[str]:
    if not flag:
        return []
    out = []
    calls = t["calls"]
    for i, c in enumerate(calls):
        if c["status"] != 429:
            continue
        until = c["t_ms"] + 1000 * float(c.get("retry_after_s") or 0)
        for later in calls[i + 1 :]:
            if later["chat_id"] == c["chat_id"] and later["t_ms"] < until:
                out.append(
                    f"{later['method']} at {later['t_ms']:.0f} ms came before the 429's retry_after ended "
                    f"({until:.0f} ms)"
                )
    return out


def _check_max_status(limits: dict[str, int], t: Transcript, ctx: dict[str, Any]) -> list[str]:
    counts = Counter(str(c["status"]) for c in t["calls"])
    return [f"{counts[s]} replies with HTTP {s}, at most {n} expected" for s, n in limits.items() if counts[s] > n]


def _check_report(want: dict[str, Any], t: Transcript, ctx: dict[str, Any]) -> list[str]:
    report = t["report"]
    return [f"report {k} is {report.get(k)!r}, expected {v!r}" for k, v in want.items() if report.get(k) != v]


def _check_pipeline(want: list[dict[str, Any]], t: Transcript, ctx: dict[str, Any]) -> list[str]:
    got = [u for u in t["pipeline"] if str(u.get("kind", "")).startswith("tool_call")]
    if len(got) != len(want):
        return [f"{len(got)} tool-call units on the pipeline lane, expected {len(want)}: {got!r}"]
    return [
        f"pipeline unit {i} has {k}={g.get(k)!r}, expected {v!r}"
        for i, (g, w) in enumerate(zip(got, want, strict=True))
        for k, v in w.items()
        if g.get(k) != v
    ]


CHECKS: dict[str, Callable[[Any, Transcript, dict[str, Any]], list[str]]] = {
    "chat": _check_chat,
    "content": _check_content,
    "last_message": _check_last,
    "max_messages": _check_max_messages,
    "min_messages": _check_min_messages,
    "each_within_limit": _check_within_limit,
    "fences_balanced": _check_fences,
    "max_calls": _check_max_calls,
    "min_calls": _check_min_calls,
    "calls": _check_calls,
    "never_contains": _check_never_contains,
    "quiet_after_429": _check_quiet_after_429,
    "max_status": _check_max_status,
    "report": _check_report,
    "pipeline": _check_pipeline,
}


def check_expectations(expect: dict[str, Any], transcript: Transcript, ctx: dict[str, Any]) -> list[str]:
    """All failures of ``expect`` against ``transcript``; an unknown key is a failure too."""
    failures: list[str] = []
    for key, want in expect.items():
        check = CHECKS.get(key)
        if check is None:
            failures.append(f"unknown expect key {key!r}: the runner knows {', '.join(CHECKS)}")
            continue
        failures.extend(check(want, transcript, ctx))
    return failures
