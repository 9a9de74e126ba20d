"""How the CLI's commands run a coroutine and report what went wrong: one line a person can act on, never a
traceback, and an exit code (2: configuration, 1: other errors, 130: Ctrl+C)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from streamrelay.core.errors import ConfigError

T = TypeVar("T")

err = Console(stderr=True, soft_wrap=True)
"""Errors and notices, on stderr, one line each however narrow the terminal."""


def fast_loop() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (it is a dependency; it has no Windows build): the service's
    sockets, timers and callbacks in C (libuv) rather than in Python, which is most of the loop's own cost under
    load; None: asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run_async(
    coro: Coroutine[Any, Any, T], *, loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
) -> T:
    """Run ``coro`` to its end and return its result; a failure becomes one line on stderr and an exit code.

    Raises:
        typer.Exit: 2 on a :class:`ConfigError`, 130 on Ctrl+C, 1 on a ``RuntimeError``, ``OSError`` or
            ``ValueError`` (their message is the line; the errors of this project say what to do); an ``OSError``
            with an ``exit_code`` (``run``'s bot command not found: 127) exits with that.
    """
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(coro)
    except ConfigError as exc:
        err.print(f"[red]configuration error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except (RuntimeError, OSError, ValueError) as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        code = getattr(exc, "exit_code", 1) if isinstance(exc, OSError) else 1
        raise typer.Exit(code if isinstance(code, int) else 1) from None
