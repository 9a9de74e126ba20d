"""``streamrelay`` commands started as processes forked from one that has already imported them (a zygote, as
Android starts its apps): :class:`Preloaded`.

A ``serve`` with a Telegram channel spends about 5 CPU-seconds importing aiogram (its pydantic models are built at
import), and one with the six chat platforms about 9 before its channels are loaded; the chaos campaign restarts its
sidecar after every kill, and the test suite starts ``serve`` processes by the dozen. A :class:`Preloaded` keeps one
zygote process (``python -m streamrelay.app.preloaded``) that imports the command line and, for each ``serve
--config FILE`` asked for, the SDK modules of the platforms ``FILE``'s channels are on
(:data:`app.platform_loading.SDK_MODULES`), once; each command is then a ``fork()`` of it: a process of its own
(its own id, killable with SIGKILL, its own session), whose imports cost nothing. What the command does from its
arguments on is the command's own code, unchanged; only the imports are shared. ``serve``'s start as an operator
runs it (the SDKs imported in a worker thread while ``/healthz`` answers) keeps being tested by plain processes.

The zygote imports nothing that reads the environment at import except :data:`IMPORT_TIME_ENV`, which a command's
environment must agree on with the zygote's (:meth:`Preloaded.start` refuses otherwise: start a plain process then).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import json
import os
import select
import signal
import subprocess
import sys
import threading
import tomllib
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

ZYGOTE = "streamrelay.app.preloaded"
"""The zygote's module (``python -m``)."""

IMPORT_TIME_ENV = ("STREAMRELAY_CHECK_CONTRACTS",)
"""Environment variables some streamrelay module reads when it is imported (core/delivery/modes.py,
core/run/monitor.py): a forked command sees the zygote's value, so its environment must hold the same."""

BASE_MODULES = ("streamrelay.app.cli", "streamrelay.app.serving", "streamrelay.app.cli_checks")
"""What the zygote imports at its start: the command line and ``serve``'s own modules (its SDKs come per config)."""


class Forked:
    """One command forked by a :class:`Preloaded` zygote, with the part of :class:`subprocess.Popen`'s interface the
    callers use (``pid``, ``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill``, ``returncode``).

    ``returncode`` follows Popen's rule: the exit status, or ``-N`` for a process ended by signal ``N``. The zygote
    reaps it (it is the zygote's child, not the caller's) and reports the status.
    """

    def __init__(self, zygote: Preloaded, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._zygote = zygote

    def poll(self) -> int | None:
        """The return code, or None while the process runs."""
        if self.returncode is None:
            self.returncode = self._zygote._exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The return code, waited for up to ``timeout`` seconds (forever if None).

        Raises:
            subprocess.TimeoutExpired: still running after ``timeout``.
        """
        code = self._zygote._wait_exit(self.pid, timeout)
        if code is None:
            raise subprocess.TimeoutExpired([str(self.pid)], timeout or 0.0)
        self.returncode = code
        return code

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the process unless it has ended."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        """SIGTERM."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL."""
        self.send_signal(signal.SIGKILL)


class Preloaded:
    """A zygote process that forks ``streamrelay`` commands with their imports done (see the module's text).

    Args:
        env: the zygote's environment (whole: pass ``os.environ`` and what to add); its :data:`IMPORT_TIME_ENV`
            values are those every command started through it must have.

    Started at the first :meth:`start` (or :meth:`begin`); stopped by :meth:`close` (or when this process exits:
    the zygote ends when its request pipe closes). The commands it started are not stopped with it.
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._changed = threading.Condition()
        self._replies: list[dict[str, Any]] = []
        self._exits: dict[int, int] = {}
        self._gone = False

    @property
    def pid(self) -> int | None:
        """The zygote's process id (None before :meth:`begin`)."""
        return self._proc.pid if self._proc is not None else None

    def begin(self) -> None:
        """Start the zygote (its base imports run meanwhile); :meth:`start` waits for them."""
        with self._lock:
            if self._proc is not None:
                return
            self._proc = subprocess.Popen(
                [sys.executable, "-m", ZYGOTE],
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                start_new_session=True,  # a Ctrl+C of the caller reaches it only through close()
            )
            threading.Thread(target=self._read, args=(self._proc.stdout,), name="preloaded", daemon=True).start()

    def start(self, args: Sequence[str], env: Mapping[str, str], log: Path, cwd: Path | None = None) -> Forked:
        """Fork ``streamrelay *args`` with the environment ``env`` (whole), stdin from /dev/null, stdout and
        stderr appended to ``log``, in ``cwd`` (the zygote's if None), in a session of its own. Blocks until the
        zygote has imported what the command needs (seconds at the zygote's first ``serve`` of a platform).

        Raises:
            ValueError: ``env`` differs from the zygote's in one of :data:`IMPORT_TIME_ENV`.
            RuntimeError: the zygote is gone, or could not fork (its error in the message).
        """
        for name in IMPORT_TIME_ENV:
            if env.get(name) != self.env.get(name):
                raise ValueError(f"{name}={env.get(name)!r}, the zygote has {self.env.get(name)!r}: start a process")
        self.begin()
        request = {"args": list(args), "env": dict(env), "log": str(log), "cwd": str(cwd or os.getcwd())}
        with self._lock:
            proc = self._proc
            assert proc is not None and proc.stdin is not None
            try:
                proc.stdin.write(json.dumps(request).encode() + b"\n")
                proc.stdin.flush()
            except OSError as exc:
                raise RuntimeError(f"the preloaded zygote is gone: {exc}") from exc
            with self._changed:
                while not self._replies and not self._gone:
                    self._changed.wait()
                if not self._replies:
                    raise RuntimeError(f"the preloaded zygote is gone (exit {proc.poll()})")
                reply = self._replies.pop(0)
        if "error" in reply:
            raise RuntimeError(f"the preloaded zygote could not start {' '.join(args)}: {reply['error']}")
        return Forked(self, int(reply["pid"]))

    def close(self) -> None:
        """Stop the zygote (its request pipe closed, then SIGKILL after 5 s); the commands it started go on."""
        with self._lock:
            proc = self._proc
            if proc is None:
                return
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                proc.stdin.close()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
            with self._changed:  # the reader closes the answers' pipe at its end
                self._changed.wait_for(lambda: self._gone, 5)

    def _read(self, stdout: IO[bytes]) -> None:
        """The zygote's answers: ``{"pid": N}`` or ``{"error": ...}`` per request, in order, and ``{"exited": N,
        "code": C}`` as each forked command ends."""
        with stdout:
            for line in stdout:
                message = json.loads(line)
                with self._changed:
                    if "exited" in message:
                        self._exits[int(message["exited"])] = int(message["code"])
                    else:
                        self._replies.append(message)
                    self._changed.notify_all()
        with self._changed:
            self._gone = True
            self._changed.notify_all()

    def _exit_code(self, pid: int) -> int | None:
        with self._changed:
            if pid in self._exits:
                return self._exits[pid]
            if self._gone:
                return self._orphan_code(pid)
            return None

    def _wait_exit(self, pid: int, timeout: float | None) -> int | None:
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or self._gone, timeout)
        return self._exit_code(pid)

    @staticmethod
    def _orphan_code(pid: int) -> int | None:
        """With the zygote gone nobody reports the status: running (None) while the process exists, else -1."""
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return -1
        return None


# ---------------------------------------------------------------- the zygote (python -m streamrelay.app.preloaded)


def config_modules(args: Sequence[str]) -> list[str]:
    """The SDK modules ``streamrelay *args`` will import: for ``serve --config FILE``, those of the platforms
    ``FILE``'s channels are on (an unreadable file: none, the command reports it); for anything else none."""
    from streamrelay.app.platform_loading import SDK_MODULES

    if not args or args[0] != "serve" or "--config" not in args[:-1]:
        return []
    try:
        tables = tomllib.loads(Path(args[list(args).index("--config") + 1]).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    channels = tables.get("channels", {})
    platforms = {c.get("platform") for c in channels.values() if isinstance(c, dict)}
    return sorted(SDK_MODULES[p] for p in platforms if isinstance(p, str) and p in SDK_MODULES)


def _child(request: dict[str, Any]) -> int:
    """In the forked process: the request's streams, directory, environment and arguments, then the command."""
    os.setsid()
    out = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)
    os.close(nothing)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["streamrelay", *request["args"]]
    from streamrelay.app.cli import app

    try:
        app(list(request["args"]))
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return 0


def _fork(request: dict[str, Any], wake: tuple[int, int]) -> int:
    """Fork the request's command; its process id (in the zygote). ``wake``: the zygote's SIGCHLD pipe."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in wake:
            os.close(fd)
        code = _child(request)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _send(message: dict[str, Any]) -> None:
    os.write(1, json.dumps(message).encode() + b"\n")


def _reap() -> None:
    """Report every forked command that has ended (``{"exited": N, "code": C}``, Popen's code rule)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send({"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def zygote() -> None:
    """The zygote's loop: import :data:`BASE_MODULES`; then per request line on stdin (JSON: ``args``, ``env``,
    ``log``, ``cwd``) import what it needs (:func:`config_modules`), fork it and answer ``{"pid": N}`` (or
    ``{"error": ...}``); report each child's end as ``{"exited": N, "code": C}``. Ends when stdin closes."""
    for module in BASE_MODULES:
        importlib.import_module(module)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    pending = b""
    while True:
        ready, _, _ = select.select([0, wake_read], [], [])
        if wake_read in ready:
            os.read(wake_read, 4096)
        _reap()
        if 0 not in ready:
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            return
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            try:
                for module in config_modules(request["args"]):
                    importlib.import_module(module)
                if threading.active_count() > 1:  # a fork copies only this thread: an import started another
                    raise RuntimeError(f"threads after the imports: {threading.enumerate()}")
                _send({"pid": _fork(request, (wake_read, wake_write))})
            except Exception as exc:  # the caller raises it; the zygote serves the next request
                _send({"error": f"{type(exc).__name__}: {exc}"})


if __name__ == "__main__":
    zygote()
