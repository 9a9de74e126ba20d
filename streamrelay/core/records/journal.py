"""The journal port: the durable log of accepted input lines, per run, in arrival order (DESIGN §8).

A line is accepted (counted in the ingest answer) only once it is in the journal. A run is a deterministic
function of its journaled lines, so a restarted sidecar rebuilds every run that had not finished by feeding its
lines through the same path again (``Relay.resume``), then reconciles with the ledger: acknowledged parts are
edited, never sent again; an intent without an outcome is settled with the platform.

What is journaled is the input line itself (a normalized event or a raw provider event, as JSON text), not the
events derived from it: the normalizers are stateful, and replaying their input rebuilds their state too.

When a run has finished, its lines are dropped and only its last ``seq`` is kept, so a re-sent ended run is
acknowledged and dropped (never a 409), also after a restart.

A run closed by the idle timeout passes a commit point before anything of its close is shown
(:meth:`Journal.close_idle`): once it is journaled, a restart resumes the run closed (:meth:`Journal.idle_closed`),
never open to lines its agent sends later.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from typing import NamedTuple, Protocol

from streamrelay.core.clock import boot_seconds


class JournalEntry(NamedTuple):
    """One accepted input line of ``run``: its JSON text, exactly as it will be replayed (a named tuple: one is made
    per accepted line)."""

    run: str
    line: str


new_entry = partial(tuple.__new__, JournalEntry)
"""``new_entry((run, line))`` is ``JournalEntry(run, line)`` made in C (the named tuple's own ``__new__`` is a Python
function): one is made per accepted line."""


def entries_of(run: str, lines: Iterable[str]) -> list[JournalEntry]:
    """One entry per line of ``run``, in order (made in C: a batch's lines of one run are many, each an entry)."""
    return list(map(new_entry, zip(repeat(run), lines)))


@dataclass(frozen=True)
class EndedRun:
    """What the journal keeps of a finished run: its last ``seq`` (None when it used none)."""

    run: str
    last_seq: int | None


@dataclass(frozen=True)
class IdleClose:
    """What the journal keeps of an unfinished run's idle close (:meth:`Journal.close_idle`): ``last_seq``, the last
    ``seq`` the run took (None: none, or it used none); ``ended``, the lines it took held its own ``end``."""

    run: str
    last_seq: int | None
    ended: bool = False


class Journal(Protocol):
    """Durable accepted lines. Implementations: :class:`MemoryJournal`, ``adapters.sqlite.SqliteJournal``."""

    async def append(self, entries: Sequence[JournalEntry]) -> None:
        """Make ``entries`` durable, in order, in one commit (group commit: concurrent callers share commits).

        Raises:
            OSError | Exception: the storage failed; nothing of ``entries`` may be counted accepted.
        """
        ...

    async def unfinished(self) -> list[str]:
        """Runs that have lines and have not finished, oldest first (their first line's order)."""
        ...

    async def lines(self, run: str) -> list[str]:
        """``run``'s journaled lines, in the order they were accepted."""
        ...

    async def last_at(self, run: str) -> float | None:
        """When ``run``'s newest line was accepted, on the journal's own clock (seconds), or None without lines."""
        ...

    async def finish(self, run: str, last_seq: int | None) -> None:
        """``run`` finished (its final is delivered or reported): drop its lines, remember its last ``seq``."""
        ...

    async def ended(self, run: str) -> EndedRun | None:
        """The finished run ``run``, or None when it never finished here."""
        ...

    async def close_idle(self, run: str, last_seq: int | None, *, ended: bool = False) -> None:
        """The commit point of ``run``'s close by the idle timeout (``last_seq``: the last ``seq`` it took, None
        without), passed before anything of the close (its final, its notice) is shown: once this returns, every
        line of ``run`` accepted before it has been handed to the run, every later line with a higher ``seq`` is
        refused with 409 wherever it arrives, and a restart resumes the run closed (:meth:`idle_closed`): it
        finishes what it had and its notice, the ledger deciding what was shown already. One process: the mark is
        durable in the journal (admission refuses the later lines itself, the run being closing); replicas: the
        run's idle-close mark in Redis, which every front's append checks atomically
        (:meth:`adapters.redis.InputStream.close_idle`).

        Called again with ``ended`` when the lines handed over took the run's own ``end``: the run ended as any run
        does, and its later lines are acknowledged and dropped wherever they arrive, as an ended run's (replicas:
        the mark says so), not refused as lines the run never took.

        Raises:
            core.errors.OwnershipLostError: another replica owns the run now (it is not closed here).
            core.errors.StoreUnavailableError: the store did not answer (the run stays open; its worker tries again).
            OSError | Exception: the one-process journal could not write the mark (nothing of the close was shown).
        """
        ...

    async def idle_closed(self, run: str) -> IdleClose | None:
        """``run``'s idle close (:meth:`close_idle`) when it passed its commit point and the run has not finished
        (:meth:`finish` forgets it), else None. A run resumed with one is closed at once, never open to new lines.
        The Redis journals answer None: their marks live in the input stream's keys, and a partition's new owner
        resumes such a run open while every front refuses its later lines, closing it again after its idle time
        (the same final: the ledger keeps its notice once)."""
        ...

    async def close(self) -> None: ...


class MemoryJournal:
    """A journal in memory (unit tests; nothing survives a restart).

    Args:
        keep_ended: how many finished runs are remembered (oldest forgotten first).
    """

    def __init__(self, keep_ended: int = 100_000) -> None:
        self._lines: dict[str, list[str]] = {}
        self._last_at: dict[str, float] = {}
        self._ended: OrderedDict[str, EndedRun] = OrderedDict()
        self._idle: dict[str, IdleClose] = {}
        self._keep = keep_ended
        self.commits = 0

    async def append(self, entries: Sequence[JournalEntry]) -> None:
        now = boot_seconds()
        run, lines = None, None
        for entry in entries:
            if entry.run != run or lines is None:  # consecutive lines of one run: one look-up
                run, lines = entry.run, self._lines.setdefault(entry.run, [])
                self._last_at[run] = now
            lines.append(entry.line)
        self.commits += 1

    async def unfinished(self) -> list[str]:
        return list(self._lines)

    async def lines(self, run: str) -> list[str]:
        return list(self._lines.get(run, []))

    async def last_at(self, run: str) -> float | None:
        return self._last_at.get(run)

    async def finish(self, run: str, last_seq: int | None) -> None:
        self._lines.pop(run, None)
        self._last_at.pop(run, None)
        self._idle.pop(run, None)
        self._ended[run] = EndedRun(run, last_seq)
        while len(self._ended) > self._keep:
            self._ended.popitem(last=False)

    async def close_idle(self, run: str, last_seq: int | None, *, ended: bool = False) -> None:
        """Keep ``run``'s idle close until it finishes (:meth:`Journal.close_idle`)."""
        self._idle[run] = IdleClose(run, last_seq, ended)

    async def idle_closed(self, run: str) -> IdleClose | None:
        return self._idle.get(run)

    async def erase(self, runs: Sequence[str]) -> int:
        """Forget ``runs``' lines (:class:`core.records.erase.Erasable`); how many there were."""
        for run in runs:
            self._last_at.pop(run, None)
            self._idle.pop(run, None)
        return sum(len(self._lines.pop(run, [])) for run in runs)

    async def ended(self, run: str) -> EndedRun | None:
        return self._ended.get(run)

    async def close(self) -> None:
        return None
