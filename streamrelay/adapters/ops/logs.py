"""The service's logging, set up in one place: structlog rendering every line, JSON or console, secrets redacted.

The code logs through the standard library (``logging.getLogger("streamrelay.…")``: core may import nothing else)
and so do the SDKs (aiogram, aiohttp, slack-sdk, discord.py) and uvicorn. :func:`configure_logging` puts one
handler on the root logger whose formatter is structlog's ``ProcessorFormatter``: every record, ours or a
library's, becomes one line, either a JSON object (``log_format = "json"``: one per line, for a collector) or a
human-readable console line (``"console"``, the default on a terminal). Fields of a JSON line:

- ``timestamp`` (ISO 8601, UTC), ``level``, ``logger``, ``event`` (the message);
- ``run``: the run whose task logged it, when a run's worker or delivery loop did (its asyncio task name);
- the ``extra={...}`` fields a call passed (the per-call delivery lines carry ``channel``, ``platform``,
  ``method``, ``outcome``, ``ms``, ``chat``, ``error``…: :mod:`adapters.ops.metered`);
- ``exception``: the traceback, as text, when one was logged.

Every line passes :class:`adapters.ops.redact.Redactor` twice: its values before rendering (secret shapes and
known values), the rendered line after (known values), so no token reaches the output in any form.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any, Literal, TextIO

import structlog
from structlog.stdlib import ProcessorFormatter
from structlog.typing import Processor

from streamrelay.adapters.ops.redact import Redactor

LogFormat = Literal["json", "console"]
LogLevel = Literal["debug", "info", "warning", "error"]

RUN_TASK_PREFIXES = ("reconciler:", "run:")
"""Task names of a run's delivery loop and worker (core names its tasks ``reconciler:<run>`` and ``run:<run>``)."""

NOISY_AT_DEBUG = {
    "aiosqlite": logging.INFO,
    "hpack": logging.INFO,
    "sse_starlette": logging.INFO,
    "pywa": logging.INFO,
    "slack_sdk": logging.INFO,
    "discord.http": logging.INFO,
}
"""Libraries capped at this level even when ``log_level = "debug"``: aiosqlite logs every statement; the others log
each request's or event's body at DEBUG, which is the agent's answer text (a person's data, which the logs never
hold): sse_starlette ``chunk: ...`` of every live-page event, pywa's request payloads, slack-sdk's ``Sending a request
- ... json: {...}``, discord.py's ``... with {data} has returned``."""
NOISY_AT_INFO = {"httpx": logging.WARNING}
"""Libraries capped at this level unless ``log_level = "debug"`` (httpx logs every request at INFO: replicas
forward requests to each other, and the ops page asks every replica every 2 s)."""


def task_run() -> str | None:
    """The run whose worker or delivery loop is the current asyncio task, from the task's name (None elsewhere)."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop
        return None
    name = task.get_name() if task is not None else ""
    for prefix in RUN_TASK_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return None


def add_run(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: ``run`` from the current task (:func:`task_run`), unless the line names one already."""
    if "run" not in event_dict and (run := task_run()) is not None:
        event_dict["run"] = run
    return event_dict


DROPPED_KEYS = ("color_message",)
"""Extras libraries add that say nothing new (uvicorn's ANSI-coloured copy of the message)."""


def drop_noise(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: remove :data:`DROPPED_KEYS`."""
    for key in DROPPED_KEYS:
        event_dict.pop(key, None)
    return event_dict


class _RedactingFormatter(ProcessorFormatter):
    """``ProcessorFormatter`` whose rendered line is scrubbed once more of the known secret values."""

    def __init__(self, redactor: Redactor, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        return self._redactor.known_only(super().format(record))


@dataclass
class LoggingSetup:
    """What :func:`configure_logging` installed; :meth:`close` takes it off again (tests)."""

    handler: logging.Handler
    redactor: Redactor
    fmt: LogFormat
    level: int
    _previous_level: int
    _previous_levels: dict[str, int]

    def close(self) -> None:
        """Remove the handler from the root logger and restore the levels it changed."""
        root = logging.getLogger()
        root.removeHandler(self.handler)
        root.setLevel(self._previous_level)
        for name, level in self._previous_levels.items():
            logging.getLogger(name).setLevel(level)


def _is_tty(stream: TextIO) -> bool:
    with contextlib.suppress(AttributeError, ValueError):
        return stream.isatty()
    return False


def _renderer(fmt: LogFormat, stream: TextIO) -> Processor:
    if fmt == "json":
        return structlog.processors.JSONRenderer(sort_keys=False)
    return structlog.dev.ConsoleRenderer(colors=_is_tty(stream), exception_formatter=structlog.dev.plain_traceback)


def configure_logging(
    fmt: LogFormat | None = None,
    level: LogLevel | str = "info",
    *,
    secrets: Iterable[str] = (),
    stream: TextIO | None = None,
) -> LoggingSetup:
    """Route every ``logging`` record (ours, the SDKs', uvicorn's) through structlog to ``stream``.

    Replaces a handler an earlier call installed (never another handler, e.g. a test's capture).

    Args:
        fmt: ``json`` (one object per line) or ``console``; None: console on a terminal, else JSON.
        level: ``debug`` | ``info`` | ``warning`` | ``error`` (the root logger's level).
        secrets: values never to print (tokens), added to the redactor.
        stream: where lines go (default: standard error).

    Returns:
        The installed setup (its redactor takes more secrets with ``add``).

    Raises:
        ValueError: an unknown level.
    """
    out = stream if stream is not None else sys.stderr
    chosen: LogFormat = fmt if fmt is not None else ("console" if _is_tty(out) else "json")
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"log_level {level!r} is not one of debug, info, warning, error")
    redactor = Redactor(secrets)
    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    shared: list[Processor] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        timestamper,
        add_run,
    ]
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, *shared, ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    formatter = _RedactingFormatter(
        redactor,
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder(), drop_noise],
        processors=[
            ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            redactor,
            _renderer(chosen, out),
        ],
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    handler._streamrelay = True  # type: ignore[attr-defined]  # found again by the next call
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_streamrelay", False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    previous = root.level
    root.setLevel(numeric)
    previous_levels: dict[str, int] = {}
    for name, cap in (NOISY_AT_DEBUG if numeric < logging.INFO else NOISY_AT_INFO).items():
        previous_levels[name] = logging.getLogger(name).level
        logging.getLogger(name).setLevel(cap)
    return LoggingSetup(handler, redactor, chosen, numeric, previous, previous_levels)
