"""``streamrelay`` commands the tests start as processes, forked from one zygote per pytest worker that has imported
the command line and each platform SDK a ``serve`` of the worker needed (:mod:`app.preloaded`): a process of its
own (killed -9, paused, sent SIGTERM as any), without the seconds of CPU its imports cost (about 5 for aiogram).

What a test checks about a fresh interpreter's start (listening before the SDKs are imported, the installed
command, the deploy forms) starts a plain process instead (test_fast_start.py, test_replica_listens_first.py,
tests/deploy)."""

from __future__ import annotations

import atexit
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from streamrelay.app.preloaded import Forked, Preloaded

ROOT = Path(__file__).resolve().parents[1]

Started = subprocess.Popen[bytes] | Forked
"""A command the tests started: a process of either kind (``pid``, ``poll``, ``wait``, signals)."""

_zygote: list[Preloaded] = []


def streamrelay_process(args: Sequence[str], env: Mapping[str, str], log: Path, cwd: Path = ROOT) -> Forked:
    """``streamrelay *args`` as a process forked from this worker's zygote (started at the first call), with the
    environment ``env`` (whole: pass ``os.environ`` and what to add), stdout and stderr appended to ``log``."""
    if not _zygote:
        _zygote.append(Preloaded(os.environ))
        atexit.register(_zygote[0].close)
    return _zygote[0].start(args, env, log, cwd)
