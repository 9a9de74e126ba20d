"""One process at a time on a journal and ledger file: an OS lock (``flock``) on ``<file>.lock`` beside it.

Two sidecars writing one journal would both resume its unfinished runs and deliver them twice; SQLite's own locks
only keep their transactions apart. The lock is the kernel's: it goes when the process does, however it ends (exit,
crash, ``kill -9``), so a stale lock file never blocks a restart. The file holds the holder's process id, for the
message the next one shows. https://man7.org/linux/man-pages/man2/flock.2.html

Where ``fcntl`` does not exist (Windows) there is no lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_WAIT_S = 1.0
"""How long an open waits for a holder that is exiting (a restart right after a stop) before it gives up."""
_POLL_S = 0.05


class LedgerLockedError(RuntimeError):
    """Another process holds the journal and ledger file.

    Attributes:
        path: the SQLite file.
        pid: the holder's process id, when its lock file tells it.
    """

    def __init__(self, path: str, pid: int | None) -> None:
        holder = f"pid {pid}" if pid is not None else "its pid unknown"
        super().__init__(
            f"the journal and ledger file {path} is in use by another streamrelay process ({holder}): stop that one "
            "first, or give this one a file of its own ([service] ledger or STREAMRELAY_SERVICE__LEDGER)"
        )
        self.path = path
        self.pid = pid


class FileLock:
    """An exclusive ``flock`` on ``<path>.lock``, held until :meth:`release` or the process ends.

    Use :meth:`acquire`.
    """

    def __init__(self, path: str, fd: int | None) -> None:
        self.path = path
        self._fd = fd

    def __repr__(self) -> str:
        return f"FileLock({self.path!r}, held={self._fd is not None})"

    @classmethod
    async def acquire(cls, path: str, *, wait_s: float = LOCK_WAIT_S) -> FileLock:
        """Lock the SQLite file ``path`` for this process, waiting up to ``wait_s`` seconds for another holder.

        Raises:
            LedgerLockedError: another process still holds it (the message names the file and its pid).
            OSError: the lock file cannot be created.
        """
        if fcntl is None:  # pragma: no cover - Windows
            return cls(path, None)
        fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, 0o600)  # not inherited by child processes
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    pid = _holder(fd)
                    os.close(fd)
                    raise LedgerLockedError(path, pid) from None
                await asyncio.sleep(_POLL_S)
            except BaseException:
                os.close(fd)
                raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        """Let the next process have the file (closing the descriptor drops the lock). Idempotent."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)


def _holder(fd: int) -> int | None:
    """The pid the holder wrote into the lock file, if it did."""
    with contextlib.suppress(OSError, ValueError):
        return int(os.pread(fd, 32, 0).decode().strip())
    return None


def lock_path(path: str | Path) -> Path:
    """The lock file of the SQLite file ``path``."""
    return Path(f"{path}.lock")
