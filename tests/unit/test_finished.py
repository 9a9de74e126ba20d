"""What the relay keeps of a finished run (issue 23, item 5): its report, lane and last seq, and of its live monitor
only what has no text of its own, with references into the ledger for its texts; never the answer. Readers after the
end get what they got before: the same report, the same last events, the same state (its answer read back from the
ledger's parts). And finished runs stay within their budgets (issue 13). Deterministic: sizes are counted, not timed."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.chunking import ChunkParams, chunk_text
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.lanes.pipeline import PipelineLane
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.records.report import DeliveryReport
from streamrelay.core.run.finished import Finished, FinishedMonitor, finished_record, rebuild, references
from streamrelay.core.run.live import ResetLive
from streamrelay.core.run.monitor import RunMonitor
from streamrelay.core.run.relay import Relay
from tests.unit.fakes import MemoryChat

START = {"kind": "run.start", "channel": "c", "target": {"chat_id": 5}}
CODE = "".join(f"print('line {i}')\n" for i in range(400))
ANSWER = f"Here is the script.\n\n```python\n{CODE}```\n\nRun it once. 📦 Then look at its output.\n"
"""About 7k characters with a code fence longer than a message: the chat shows it cut, closed and reopened."""
RECORDING = Path(__file__).parent.parent / "streams" / "anthropic" / "markdown-long-fences.jsonl"


def _relay(ledger: MemoryLedger | None = None) -> tuple[Relay, MemoryChat, MemoryLedger]:
    chat, ledger = MemoryChat(), ledger or MemoryLedger()
    return (
        Relay({"c": ChannelRuntime(ChannelPolicy(name="c", throttle_s=0), chat)}, ledger, MonotonicClock()),
        chat,
        ledger,
    )


async def _run(relay: Relay, run: str, text: str) -> tuple[DeliveryReport, RunMonitor, PipelineLane]:
    """Stream ``text`` as 7-character deltas and end; the live monitor and lane as they were at the end."""
    await relay.submit_line({**START, "run": run})
    for k in range(0, len(text), 7):
        await relay.submit_line({"kind": "text", "run": run, "text": text[k : k + 7]})
    live, lane = relay.monitor(run), relay.lane(run)
    assert isinstance(live, RunMonitor) and lane is not None
    await relay.submit_line({"kind": "end", "run": run})
    report = await relay.wait_done(run, 5)
    assert report is not None and report.status == "delivered"
    return report, live, lane


def _kept(finished: Finished) -> str:
    return finished.document()


async def test_a_finished_run_keeps_its_report_and_references_not_its_answer() -> None:
    relay, chat, _ = _relay()
    report, live, lane = await _run(relay, "r1", ANSWER)
    assert sum(m.startswith("```python") for m in chat.messages.values()) == 2  # the fence was cut and reopened
    finished = relay._finished["r1"]
    kept = _kept(finished)
    assert "print('line 17')" not in kept and "Run it once" not in kept  # no text of the answer, anywhere
    assert finished.size <= 4096 and finished.chars < 3000  # the answer alone is 7k characters (28 KB as one str)
    kept_as_is = [p for p in finished.kept().answer if isinstance(p, str)]
    assert kept_as_is == ["\n\n", "\n"]  # the blank line a cut dropped, the last newline the chat dropped
    # readers after the end get what they got before: the report, the lane, the last events, the state
    assert await relay.report("r1") == report
    kept_lane = relay.lane("r1")
    assert kept_lane is not None and kept_lane.closed and kept_lane.units == lane.units
    assert [u.kind for u in kept_lane.units] == ["commit", "run.end"]
    watched = relay.monitor("r1")
    assert isinstance(watched, FinishedMonitor) and (watched.epoch, watched.last_id) == (live.epoch, live.last_id)
    behind = live.last_id - 3
    assert await watched.wait(behind) == live.since(behind)
    [reset], before = await watched.wait(-1), live.reset()
    assert isinstance(reset, ResetLive) and reset.state == before.state and reset.state["answer"] == ANSWER
    assert (reset.id, reset.run, reset.seq) == (before.id, before.run, before.seq)
    assert await watched.wait(live.last_id) == []
    await relay.close()


async def test_a_finished_run_whose_ledger_parts_changed_shows_what_they_show() -> None:
    relay, _, ledger = _relay()
    await _run(relay, "r1", ANSWER)
    parts = await ledger.parts("r1")
    await ledger.save_part(replace(parts[0], shown="Here is something else."))
    [reset] = await relay._finished["r1"].monitor.wait(-1)
    shown = "Here is something else." + "".join(p.shown or "" for p in parts[1:])
    assert (
        isinstance(reset, ResetLive) and reset.state["answer"] == shown
    )  # what the chat shows, never pieces of another text
    await relay.close()


async def test_a_run_whose_parts_were_not_read_keeps_its_answer_as_text() -> None:
    monitor = RunMonitor("r1")
    monitor.publish("answer", delta=ANSWER)
    monitor.publish("end", status="cancelled", delivery="failed")
    report = DeliveryReport(run="r1", channel="c")
    finished = finished_record(report, PipelineLane("r1"), monitor.record(), None, MemoryLedger(), None)
    assert finished.kept().answer == [ANSWER] and finished.chars > len(ANSWER)  # counted in the budgets
    [reset] = await finished.monitor.wait(-1)
    assert isinstance(reset, ResetLive) and reset.state["answer"] == ANSWER and reset.state["ended"] == "cancelled"


async def test_finished_runs_stay_within_their_byte_budget() -> None:
    relay, _, _ = _relay()
    budget = 5_000
    relay._finished.budget_bytes = budget
    for i in range(8):
        await _run(relay, f"r{i}", "\U0001f600" * 3000)  # 4 bytes a character, as one str
    finished = relay._finished
    assert finished.chars < finished.budget_chars  # the character budget alone would keep them all
    assert finished.bytes <= budget and 1 < len(finished) < 8 and "r7" in finished and "r0" not in finished
    assert finished.bytes == sum(f.size for f in finished.values())
    assert all(f.size < 4096 for f in finished.values())  # 12 KB of answer each, kept in the ledger only
    old = await relay.report("r0")  # rebuilt from the ledger
    assert old is not None and old.done and old.status == "delivered"
    await relay.close()


def test_the_recorded_answer_cut_into_messages_is_pieces_of_them_but_a_few_blank_lines() -> None:
    lines = [json.loads(line) for line in RECORDING.read_text().splitlines() if line.strip()]
    answer = "".join(e["delta"]["text"] for e in lines if e.get("delta", {}).get("type") == "text_delta")
    assert len(answer) > 8000
    for max_chars in (500, 1500, 4096):
        chunks = chunk_text(answer, ChunkParams(min_chars=0, max_chars=max_chars))
        parts = list(enumerate(chunks))
        pieces = references(answer, parts)
        assert rebuild(pieces, dict(parts)) == answer
        assert sum(len(p) for p in pieces if isinstance(p, str)) <= 4 * len(chunks)


@given(st.text(st.sampled_from("ab \n`x"), max_size=300), st.lists(st.integers(0, 300), max_size=6))
def test_references_always_join_to_the_text(text: str, cuts: list[int]) -> None:
    bounds = sorted({0, len(text), *(min(c, len(text)) for c in cuts)})
    parts = [(k, "```\n" + text[a:b].strip() + "\n```") for k, (a, b) in enumerate(itertools.pairwise(bounds))]
    assert rebuild(references(text, parts), dict(parts)) == text
