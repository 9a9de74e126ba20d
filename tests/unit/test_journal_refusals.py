"""What a journal that refuses a write (a full or read-only disk) leaves behind (issue 24, item 6): the same raw
provider lines sent again give the same events once (the normalizer is as before the refused batch), and a run that
finished while its journal could not be closed stays finished when the disk heals, its report true."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.journal import JournalEntry, MemoryJournal
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from tests.unit.fakes import MemoryChat

STREAMS = Path(__file__).parents[1] / "streams"


class _FlakyJournal(MemoryJournal):
    """A journal whose next ``refuse`` appends, and whose finishes while ``full``, fail (a full disk)."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse = 0
        self.full = False

    async def append(self, entries: Sequence[JournalEntry]) -> None:
        if self.refuse:
            self.refuse -= 1
            raise OSError("database or disk is full")
        await super().append(entries)

    async def finish(self, run: str, last_seq: int | None) -> None:
        if self.full:
            raise OSError("database or disk is full")
        await super().finish(run, last_seq)


def _relay(journal: MemoryJournal, ledger: MemoryLedger | None = None) -> tuple[Relay, MemoryChat]:
    chat = MemoryChat()
    channels = {"c": ChannelRuntime(ChannelPolicy(name="c", throttle_s=0), chat)}
    return Relay(channels, ledger or MemoryLedger(), MonotonicClock(), journal=journal), chat


def _raw(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (STREAMS / name).read_text(encoding="utf-8").splitlines() if line.strip()]


async def _deliver(stream: str, fmt: str, refused_batch: int | None, size: int) -> tuple[dict[str, str], Any]:
    """The stream posted ``size`` lines a request; the request ``refused_batch`` refused once (then sent again)."""
    journal = _FlakyJournal()
    relay, chat = _relay(journal)
    start = {"kind": "run.start", "run": "r", "channel": "c", "target": {"chat_id": 5}, "format": fmt}
    await relay.submit_lines([(start, None)])
    lines = _raw(stream)
    for number, at in enumerate(range(0, len(lines), size)):
        batch = [(dict(obj), None) for obj in lines[at : at + size]]
        if number == refused_batch:
            journal.refuse = 1
            with pytest.raises(OSError):  # answered 503: nothing of it taken
                await relay.submit_lines(batch, "r")
        results = await relay.submit_lines(batch, "r")
        assert all(not isinstance(r, Exception) and r.dropped is None for r in results), results
    await relay.submit_lines([({"kind": "end", "status": "ok"}, None)], "r")
    report = await relay.wait_done("r", 30)
    units = [unit.model_dump(mode="json") for unit in relay.pipeline("r") or []]
    await relay.close()
    return dict(chat.messages), (report.status if report else None, units)


@pytest.mark.parametrize(
    ("stream", "fmt"),
    [("anthropic/multi-message-tools.jsonl", "anthropic"), ("openai-chat/tool-call.jsonl", "openai-chat")],
)
@pytest.mark.parametrize("size", [1, 7])
async def test_raw_lines_sent_again_after_a_refused_batch_give_the_same_events_once(
    stream: str, fmt: str, size: int
) -> None:
    expected = await _deliver(stream, fmt, None, size)
    batches = -(-len(_raw(stream)) // size)
    for refused in sorted({0, 1, 2, batches // 3, batches // 2, batches - 1}):
        assert await _deliver(stream, fmt, refused, size) == expected, refused


async def test_a_run_that_finished_while_its_journal_could_not_be_closed_stays_finished() -> None:
    journal = _FlakyJournal()
    ledger = MemoryLedger()
    relay, chat = _relay(journal, ledger)
    start = {"kind": "run.start", "run": "r", "channel": "c", "target": {"chat_id": 5}}
    await relay.submit_lines([(start, None), ({"kind": "text", "run": "r", "text": "Done."}, None)])
    journal.full = True  # the disk fills as the run ends: its journal.finish fails
    await relay.submit_lines([({"kind": "end", "status": "ok"}, None)], "r")
    report = await relay.wait_done("r", 30)
    assert report is not None and report.status == "delivered" and report.done
    assert await journal.unfinished() == ["r"]
    units = relay.pipeline("r")
    assert units is not None and [unit.kind for unit in units] == ["commit", "run.end"]

    journal.full = False  # the disk heals: the store's watcher resumes what the journal holds unfinished
    assert await relay.resume() == []
    assert await journal.unfinished() == [] and await journal.ended("r") is not None
    assert await relay.report("r") == report  # the finished run as it was: its report, lane and live page
    assert relay.pipeline("r") == units and relay.monitor("r") is not None
    assert await relay.resume() == [] and relay.pipeline("r") == units  # again: nothing to do
    assert list(chat.messages.values()) == ["Done."]
    await relay.close()

    # a restart before the disk healed (nothing in memory): the ledger says the run ended, so it is not resumed
    journal = _FlakyJournal()
    relay, chat = _relay(journal, ledger)
    await relay.submit_lines([({**start, "run": "s"}, None), ({"kind": "text", "run": "s", "text": "Also."}, None)])
    journal.full = True
    await relay.submit_lines([({"kind": "end", "status": "ok"}, None)], "s")
    assert (report := await relay.wait_done("s", 30)) is not None and report.status == "delivered"
    await relay.close()
    journal.full = False
    restarted, chat2 = _relay(journal, ledger)
    assert await restarted.resume() == []
    assert await journal.unfinished() == []
    after = await restarted.report("s")
    assert after is not None and after.status == "delivered" and after.done, after
    assert chat2.messages == {}  # nothing sent again
    await restarted.close()


async def test_an_approval_asked_in_a_refused_batch_is_asked_again_once() -> None:
    journal = _FlakyJournal()
    relay, _ = _relay(journal)
    start = {"kind": "run.start", "run": "r", "channel": "c", "target": {"chat_id": 5}}
    await relay.submit_lines([(start, None)])
    ask = {
        "kind": "approval.request",
        "run": "r",
        "id": "a1",
        "question": "Ok?",
        "approvers": ["telegram:user:1"],
        "ttl_s": 60,
    }
    journal.refuse = 1
    with pytest.raises(OSError):
        await relay.submit_lines([(ask, None)])
    taken = (await relay.submit_lines([(ask, None)]))[0]
    assert not isinstance(taken, Exception) and taken.events == 1  # taken now: not "already asked"
    assert relay.approval("r", "a1")["state"] == "pending"
    again = await relay.submit_lines([(ask, None)])
    assert "already asked" in str(again[0])
    await relay.close()
