"""Fixed samples the fuzz strategies draw from (tests/fuzz/strategies.py): hostile text, values of the wrong type,
bad ``seq`` values, bytes that are not UTF-8, blank lines, JSON that is not an object, hostile run ids, bad
``run.start`` targets and overrides."""

from __future__ import annotations

from typing import Any

from streamrelay.core.events import MAX_SEQ

HOSTILE_SNIPPETS = (
    "<script>alert(1)</script>",
    "<b>bold</b> &amp; <a href='javascript:alert(1)'>x</a>",
    "\u202eevil\u202c",
    "\u2066isolate\u2069 \u200f\u200e",
    "\x00\x01\x07\x1b[31mred\x1b[0m\x7f",
    "\u0085\u2028\u2029",
    "\ufeff\u200b\u00ad",
    "@everyone <@123> <!channel>",
    "```\nfence",
    "*_~`|[link](http://x)",
    "\r\n\r\n",
    "😀" * 5,
    "Z\u0351\u0352\u0353\u0354\u0355\u0356\u0357",
    "%s%n{0}${x}",
)
WRONG_VALUES: tuple[Any, ...] = (None, True, False, 0, -1, 1.5, 1e300, "", "x", [], {}, [1, "a"], {"a": 1}, 10**29)
BAD_SEQS: tuple[Any, ...] = ("7", 10**29, -1, True, False, 1.5, 7.0, MAX_SEQ + 1, 2**63, -0.0, 1e300, [7], {"n": 7})
BAD_BYTES = (b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x80", b"\x00")
BLANK_LINES = (b"", b" ", b"\t", b"  \t ", b"\r", b"\x0b\x0c", "\u00a0".encode(), "\u3000".encode())
NOT_OBJECTS = (b"[]", b'"text"', b"7", b"-0.5e3", b"null", b"true", b'[{"kind":"text","text":"x"}]', b'""', b"{}")
HOSTILE_RUN_IDS = (
    "a/b",
    "..",
    "../../etc/passwd",
    " ",
    "a b",
    "x" * 300,
    "x" * 201,
    "ünïcödé",
    "😀",
    "\u202erun",
    "run\x00id",
    "run\nid",
    "\ud800",
    "%2F",
    "?x=1",
    "#frag",
    "",
)
BAD_TARGETS: tuple[Any, ...] = (
    {"chat_id": []},
    {"chat_id": {}},
    {"chat_id": True},
    {"chat_id": 1.5},
    {"chat_id": None},
    {"chat_id": 5, "reply_to": [1]},
    {"chat_id": 5, "extra": 1},
    {},
    [],
    "5",
)
"""Targets no channel takes (a wrong type or shape)."""
ODD_TARGETS: tuple[Any, ...] = (
    {"chat_id": ""},
    {"chat_id": "abc"},
    {"chat_id": 10**30},
    {"chat_id": -(10**30)},
    {"chat_id": "\u00b2"},
    {"chat_id": "\u0661\u0662\u0663"},
    {"chat_id": "@"},
    {"chat_id": 5, "thread_id": "main"},
    {"chat_id": 5, "thread_id": "\u00b2"},
)
"""Targets of the right types that Telegram refuses (a web page is named by anything)."""
BAD_OVERRIDES: tuple[Any, ...] = (
    {"nope": 1},
    {"throttle_ms": -1},
    {"throttle_ms": "5"},
    {"throttle_ms": True},
    {"throttle_ms": 1e308},
    {"throttle_ms": 10**400},
    {"format": "html"},
    {"subagents": []},
    {"reasoning": {}},
    {"reasoning_opened": "yes"},
    {"delta_replay_guard": None},
    [],
    "plain",
)
