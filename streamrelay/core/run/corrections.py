"""Corrections and retractions of ended runs (docs/corrections.md); the records: :mod:`core.records.corrections`.

After a run ended, its agent or an operator may send a new final (``run.correct``) or withdraw the answer
(``run.retract``). The answer's messages are those the ledger says show the run's answer (its ``answer`` parts with
a message, in order), or, after an earlier correction, what that correction left (:meth:`CorrectionRecord.after`).

**The plan** (:func:`plan`, no I/O): a correction's text is chunked with the channel's rules for a final
(:class:`core.policy.Splitter`: the channel's limit, its format, its measure) and mapped onto the messages:

- message k is edited to new chunk k (skipped when it already shows it);
- new chunks past the last message are sent as new messages after it, in order: a send left to try again (failed,
  or cut unsettled) holds back the sends after it until the next try, so the chat keeps the answer's order;
- messages past the last new chunk are deleted.

A retraction deletes each message. A platform that cannot edit (``ChannelPolicy.edits`` False: WhatsApp,
https://developers.facebook.com/docs/whatsapp/cloud-api/guides/send-messages) gets the correction as a reply to the
answer's first message (a retraction: a notice replying to it).

**Refusals** (:func:`react`, a table, no I/O): a message that cannot be edited any more (Telegram's 48-hour edit
window for bots, "message can't be edited", https://core.telegram.org/bots/api#editmessagetext; Slack
``cant_update_message`` / ``edit_window_closed``, https://docs.slack.dev/reference/methods/chat.update#errors) makes
the whole correction be posted as a reply instead (once): the steps not made yet are skipped, what was already
edited stays edited; a message that cannot be deleted (Telegram: older than 48 hours,
https://core.telegram.org/bots/api#deletemessage) is edited to a short marker line; one that is already gone counts
as deleted.

**Once.** Each correction is journaled with its id before any call; every step is written ``started`` before its
call and with its outcome after (the ledger's intent and outcome), and made through the conversation's executor
(its send chain, rate budgets, the adapter's one ``perform``), as the desk's resend is (:mod:`core.run.desk`). A
correction sent again with the same id is the same one: applied once (its unfinished steps go on). After a kill -9
the service resumes every correction still ``applying``: an edit, a marker or a delete is made again (idempotent:
"not modified" and "already gone" are done), a send whose call was under way is settled with the platform first
(Discord's nonce, Slack's metadata, Telegram's probe with an exclusive bot: ``settle_send``), never sent twice
blindly. What the settle says is followed as for an answer's part (:func:`follow`, the delivery machine's rules): found
is done; not stored is sent again; a platform that needs a bound (Telegram private chats) gets the chunk again and
the first create settled below it (found: the copy deleted); one that cannot tell gets it again when a restart cut
the create or a 5xx met it (the first create reported: a duplicate is possible), not when it timed out after
reaching the platform (reported uncertain).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Protocol

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import Clock
from streamrelay.core.delivery.calls import Call, CallResult, Delete, Done, Edit, NotDone, SendText, Settle, Unknown
from streamrelay.core.delivery.executor import Executor
from streamrelay.core.delivery.machine import reached
from streamrelay.core.errors import (
    PayloadRejectedError,
    RateLimitedError,
    RejectReason,
    StreamrelayError,
    TargetNotFoundError,
    TransientDeliveryError,
)
from streamrelay.core.events import MAX_PLACES, RunCorrect, RunRetract, Target
from streamrelay.core.policy import Splitter
from streamrelay.core.ports import PendingSend, Settlement, SettleOutcome, TextFormat
from streamrelay.core.records.corrections import (
    CREATES,
    OPEN_STEPS,
    CorrectionKind,
    CorrectionRecord,
    CorrectionState,
    CorrectionStore,
    Step,
    StepOp,
    StepState,
)
from streamrelay.core.records.ledger import Ledger, PartRecord
from streamrelay.core.records.report import PartState, SlotRole
from streamrelay.core.run.fanout import place_ledger_run
from streamrelay.core.text.safe_text import safe_text

CORRECTION_HEAD = "✏️ Correction:"
"""What the first message of a correction posted as a reply begins with (a line of its own)."""
RETRACTED_LINE = "🗑 This answer was retracted."
"""What a retracted message that cannot be deleted is edited to (and the notice replying to an answer that can be
neither deleted nor edited), the retraction's ``reason`` after it when given."""
REMOVED_LINE = "🗑 (removed by a correction)"
"""What a message a correction no longer needs is edited to where it cannot be deleted."""
RETRIES = 6
"""How many times an edit, a delete or a settle is tried through an outage or 429s before its step is ``failed``."""
RETRY_MAX_S = 15.0
"""The longest wait between two tries (seconds)."""
SENDS_MAX = 3
"""How many creates one chunk of a correction gets at most when the platform cannot say whether one landed (each
earlier one reported: a duplicate is possible); past them the step stays ``uncertain``."""


_log = logging.getLogger("streamrelay.corrections")


def correction_delivery_id(run: str, correction_id: str, step: int) -> str:
    """The delivery id of step ``step`` of a correction (25 characters: Discord's nonce limit,
    https://discord.com/developers/docs/resources/message#create-message): the same on every try of that step, never
    one of the run's own creates' (:func:`core.delivery.slots.delivery_id`)."""
    return "sr" + hashlib.sha256(f"{run}\x00correction\x00{correction_id}\x00{step}".encode()).hexdigest()[:23]


Shown = tuple[str, str]
"""One message of the answer: its id and the text it shows."""


def answer_messages(parts: Sequence[PartRecord]) -> list[Shown]:
    """The messages that show a run's answer, in order: its ``answer`` parts acknowledged with a message (a native
    stream's handle that never became a message is not one)."""
    return [
        (part.message_id, part.shown or "")
        for part in parts
        if part.role is SlotRole.ANSWER
        and part.message_id is not None
        and not part.streaming
        and part.state in (PartState.ACKED, PartState.PENDING, PartState.FAILED)
        and part.slot >= 0
    ]


def layout(messages: Sequence[Shown], earlier: Sequence[CorrectionRecord]) -> list[Shown]:
    """The answer's messages once the ``earlier`` corrections' done steps are counted, in order (what the next
    correction maps onto)."""
    shown = list(messages)
    for record in earlier:
        for step in record.steps:
            if step.state not in (StepState.DONE, StepState.UNCERTAIN) or step.message_id is None:
                continue
            if step.op in (StepOp.EDIT, StepOp.MARK):
                shown = [(mid, step.text if mid == step.message_id else text) for mid, text in shown]
            elif step.op is StepOp.DELETE:
                shown = [(mid, text) for mid, text in shown if mid != step.message_id]
            elif step.op in CREATES:
                shown.append((step.message_id, step.text))
    return shown


def marker(kind: CorrectionKind, reason: str | None = None) -> str:
    """The line a message that cannot be deleted is edited to."""
    if kind is CorrectionKind.CORRECT:
        return REMOVED_LINE
    return f"{RETRACTED_LINE} {reason}" if reason else RETRACTED_LINE


def reply_text(text: str) -> str:
    """A correction as it is posted as a reply: :data:`CORRECTION_HEAD`, a blank line, the new text."""
    return f"{CORRECTION_HEAD}\n\n{text}"


def reply_steps(
    kind: CorrectionKind, text: str, split: Callable[[str], list[str]], reason: str | None = None
) -> list[Step]:
    """The steps that post a correction (:func:`reply_text` cut by ``split``: the head counts against the first
    message's limit) or a retraction's notice as replies to the answer's first message."""
    if kind is CorrectionKind.RETRACT:
        return [Step(StepOp.REPLY, text=marker(kind, reason))]
    return [Step(StepOp.REPLY, text=chunk, part=index) for index, chunk in enumerate(split(reply_text(text)))]


def plan(
    kind: CorrectionKind,
    messages: Sequence[Shown],
    text: str,
    *,
    split: Callable[[str], list[str]],
    edits: bool,
    reason: str | None = None,
) -> list[Step]:
    """The steps of a correction or retraction (module docstring), no I/O.

    Args:
        kind: correct or retract.
        messages: the answer's messages (id, text shown), in order; at least one.
        text: the new final (a retraction: ignored).
        split: cuts a text into message parts with the channel's rules (:meth:`core.policy.Splitter.split`).
        edits: the platform can edit (and delete) a sent message.
        reason: a retraction's reason (shown where a message is marked instead of deleted).
    """
    if not edits:
        return reply_steps(kind, text, split, reason)
    if kind is CorrectionKind.RETRACT:
        return [Step(StepOp.DELETE, message_id=mid) for mid, _ in messages]
    chunks = split(text)
    steps: list[Step] = []
    for index, chunk in enumerate(chunks):
        if index < len(messages):
            mid, text = messages[index]
            same = text == chunk
            steps.append(
                Step(
                    StepOp.EDIT,
                    message_id=mid,
                    text=chunk,
                    part=index,
                    state=StepState.SKIPPED if same else StepState.PLANNED,
                    outcome="already shows the new text" if same else None,
                )
            )
        else:
            steps.append(Step(StepOp.SEND, text=chunk, part=index))
    steps += [Step(StepOp.DELETE, message_id=mid) for mid, _ in messages[len(chunks) :]]
    return steps


def shown_answer(record: CorrectionRecord) -> str:
    """What a run's live page shows as its answer after ``record``: the new final, or a retraction's line (with its
    reason), as the chat shows where it cannot delete."""
    return record.text if record.kind is CorrectionKind.CORRECT else marker(record.kind, record.text or None)


class Reaction(enum.StrEnum):
    """What follows a step the platform refused (:func:`react`)."""

    DONE = "done"
    """It needs nothing more (a delete of a message already gone)."""
    MARK = "mark"
    """A delete refused: the message is edited to :func:`marker`."""
    REPLY = "reply"
    """An edit refused: the correction (or the retraction's notice) is posted as a reply, once."""
    NONE = "none"
    """Nothing else can be done: the step is reported."""


def react(kind: CorrectionKind, op: StepOp, *, gone: bool, replied: bool) -> Reaction:
    """What follows the refusal of a step ``op`` of a correction of ``kind`` (no I/O).

    Args:
        kind: correct or retract.
        op: the refused step's call.
        gone: the platform said the message does not exist (any more).
        replied: the correction was already posted as a reply (a second reply is never planned).
    """
    if op is StepOp.DELETE:
        return Reaction.DONE if gone else Reaction.MARK
    if op in (StepOp.EDIT, StepOp.MARK):
        if op is StepOp.MARK and kind is CorrectionKind.CORRECT and gone:
            return Reaction.DONE  # a surplus message gone is what was wanted
        return Reaction.NONE if replied else Reaction.REPLY
    return Reaction.NONE  # a send or a reply refused: reported


def finished_state(steps: Sequence[Step]) -> CorrectionState:
    """A correction's state once no step is left to try: ``applied`` when every step is done, skipped, or refused
    with its follow-up planned; else ``partial``."""
    if any(s.state in (StepState.FAILED, StepState.UNCERTAIN, StepState.PLANNED, StepState.STARTED) for s in steps):
        return CorrectionState.PARTIAL
    if any(s.state is StepState.REFUSED and s.op in CREATES for s in steps):
        return CorrectionState.PARTIAL
    return CorrectionState.APPLIED


class Follow(enum.StrEnum):
    """What follows the settle of a create (a send or a reply) whose outcome was unknown (:func:`follow`)."""

    LANDED = "landed"
    """Found: the step is done, with the message found (never sent a second time)."""
    AGAIN = "again"
    """Not stored: the step is made again (it is the only copy)."""
    AGAIN_BOUNDED = "again_bounded"
    """The platform can tell only below a later message (Telegram private chats and basic groups): the chunk is
    sent again as a new message, then the first create is settled below it; found: the new copy is deleted."""
    AGAIN_REPORTED = "again_reported"
    """The platform cannot tell and the create most likely did not land: the chunk is sent again as a new message,
    the first create reported (uncertain: a duplicate is possible)."""
    UNCERTAIN = "uncertain"
    """The platform cannot tell and the create most likely landed: reported uncertain, not sent again."""


def follow(outcome: SettleOutcome, *, restarted: bool, reached: bool, again: bool) -> Follow:
    """What follows a settle of a correction's create whose outcome was unknown: the delivery machine's rules for
    an answer's part (:meth:`core.delivery.machine.DeliveryMachine._settled`, no I/O). The person sees the whole
    correction, with a possible duplicate reported, rather than a chunk missing; what the platform says landed is
    never sent a second time.

    Args:
        outcome: what the platform said (:class:`core.ports.SettleOutcome`).
        restarted: a restart cut the call (no answer of it was ever seen: the process died).
        reached: the call reached the platform without an answer (a timeout, an unreadable 2xx:
            :func:`core.delivery.machine.reached`), which most often stored it; a 5xx or a reset says less.
        again: this chunk was sent :data:`SENDS_MAX` times already (each earlier create reported): never one
            more copy on a guess.
    """
    if outcome is SettleOutcome.FOUND:
        return Follow.LANDED
    if outcome is SettleOutcome.NOT_SENT:
        return Follow.AGAIN
    if again:
        return Follow.UNCERTAIN
    if outcome is SettleOutcome.NEEDS_BOUND:
        return Follow.AGAIN_BOUNDED
    return Follow.AGAIN_REPORTED if restarted or not reached else Follow.UNCERTAIN


DUPLICATE = "a duplicate is possible"
"""What the outcome of a create that may show beside its copy says (the words of an answer's report)."""


def _maybe_twice(text: str) -> str:
    """The report of a create that may show beside its copy, in the words of an answer's (``SlotBook.orphans_of``)."""
    return f"a message of {len(text)} characters may show too ({DUPLICATE})"


class CorrectionError(StreamrelayError):
    """A correction that cannot be taken: ``status`` is its HTTP status (404 unknown run, 409 not possible now,
    501 not served here, 503 the store did not answer)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class CorrectionService(Protocol):
    """What the correction routes call (:mod:`adapters.ingest_http.corrections`): :class:`Corrections` in one
    process; on Redis replicas :class:`app.replicas.ended.ReplicaCorrections`, which hands each run's correction to
    the :class:`Corrections` of its partition's owner."""

    async def submit(self, run: str, asked: RunCorrect | RunRetract) -> CorrectionRecord:
        """As :meth:`Corrections.submit`."""
        ...

    async def list(self, run: str) -> list[CorrectionRecord]:
        """As :meth:`Corrections.list`."""
        ...

    async def get(self, run: str, correction_id: str) -> CorrectionRecord:
        """As :meth:`Corrections.get`."""
        ...


class Corrections:
    """Takes, applies, resumes and lists corrections (module docstring).

    Args:
        ledger: the ledger (runs and their parts; the executor's).
        store: where corrections are kept (the same ledger's :class:`~core.records.corrections.CorrectionStore`
            side).
        channels: the configured channels by name (their adapters, policies and send chains).
        clock: the injected clock (the send chains').
        wall: wall-clock seconds (the records' times).
        sleep: how a retry waits (tests pass a fast one).
        shown: told each correction once its steps are done (applied or partial), with the run and what its answer
            now is (:func:`shown_answer`): the live page's (:meth:`core.run.relay.Relay.corrected`).
    """

    def __init__(
        self,
        ledger: Ledger,
        store: CorrectionStore,
        channels: Mapping[str, ChannelRuntime],
        clock: Clock,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], object] | None = None,
        shown: Callable[[str, str], object] | None = None,
    ) -> None:
        self.ledger = ledger
        self.shown = shown
        self.store = store
        self.channels = channels
        self._clock = clock
        self._wall = wall
        self._sleep = sleep or asyncio.sleep
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        """Per run: its lock and how many corrections hold it or wait for it (gone at 0: a client posting to many
        run ids keeps nothing)."""

    @contextlib.asynccontextmanager
    async def _lock(self, run: str) -> AsyncIterator[None]:
        """Hold run ``run``'s lock: its corrections are taken and applied one at a time."""
        lock, users = self._locks.get(run, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[run] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[run]
            if users <= 1:
                del self._locks[run]
            else:
                self._locks[run] = (lock, users - 1)

    async def list(self, run: str) -> list[CorrectionRecord]:
        """The corrections of run ``run`` (a run key), oldest first.

        Raises:
            CorrectionError: 404 the run is unknown here (or another client's), as :meth:`submit` says.
        """
        records = await self.store.corrections(run)
        if not records and await self.ledger.get_run(run) is None:
            raise CorrectionError(f"unknown run {run!r}", 404)
        return records

    async def get(self, run: str, correction_id: str) -> CorrectionRecord:
        """One correction.

        Raises:
            CorrectionError: 404 none with that id in that run.
        """
        record = await self.store.correction(run, correction_id)
        if record is None:
            raise CorrectionError(f"run {run!r} has no correction {correction_id!r}", 404)
        return record

    async def submit(self, run: str, asked: RunCorrect | RunRetract) -> CorrectionRecord:
        """Take a correction of run ``run`` (a run key) and apply it; the record as it then stands. The same id sent
        again returns the first one (its unfinished steps tried again), never applies it twice.

        A fan-out run's correction applies to every place (:mod:`core.run.fanout`), each its own record under the
        place's ledger run id; the record returned, and any refusal raised, is the first place's (another place that
        refuses it, e.g. one that shows no answer, is logged).

        Raises:
            CorrectionError: 404 the run is unknown (or another client's); 409 it has not ended, it shows no answer
                message, it was retracted, the id names another correction, or its channel is not configured here.
        """
        kind = CorrectionKind.CORRECT if isinstance(asked, RunCorrect) else CorrectionKind.RETRACT
        if isinstance(asked, RunCorrect):
            text = safe_text(asked.text)
        else:  # a retraction keeps its reason as its text (shown in its marker lines and notice)
            text = safe_text(asked.reason) if asked.reason else ""
        first: CorrectionRecord | CorrectionError
        try:
            first = await self._submit_one(run, asked, kind, text)
        except CorrectionError as exc:
            first = exc
        ended = await self.ledger.get_run(run)
        if ended is not None and ended.ended:  # a fan-out run ended in every place once its first place's end is
            for place_run in await self._other_places(run):  # a fan-out run: every place is corrected the same
                try:
                    await self._submit_one(place_run, asked, kind, text)
                except CorrectionError as exc:
                    _log.warning("correction %s of run %s not applied there: %s", asked.id, place_run, exc)
        if isinstance(first, CorrectionError):
            raise first
        return first

    async def _other_places(self, run: str) -> tuple[str, ...]:
        """The ledger run ids of a fan-out run's places after the first (:func:`core.run.fanout.place_ledger_run`),
        in order; none for a run to one place. O(places) ledger reads."""
        found: tuple[str, ...] = ()
        for index in range(1, MAX_PLACES):
            place_run = place_ledger_run(run, index)
            if await self.ledger.get_run(place_run) is None:
                break
            found += (place_run,)
        return found

    async def _submit_one(
        self, run: str, asked: RunCorrect | RunRetract, kind: CorrectionKind, text: str
    ) -> CorrectionRecord:
        """:meth:`submit` for one conversation's ledger run id ``run``."""
        async with self._lock(run):
            record = await self.store.correction(run, asked.id)
            if record is not None:
                if record.kind is not kind or record.text != text:
                    raise CorrectionError(
                        f"correction {asked.id!r} of run {run!r} was already taken with another "
                        f"{'text' if record.kind is kind else 'kind'}: a new correction needs a new id",
                        409,
                    )
                if record.state is CorrectionState.APPLIED:
                    return record
                return await self._apply(record)
            record = await self._take(run, asked.id, kind, text)
            return await self._apply(record)

    async def _take(self, run: str, correction_id: str, kind: CorrectionKind, text: str) -> CorrectionRecord:
        found = await self.ledger.get_run(run)
        if found is None:
            raise CorrectionError(f"unknown run {run!r}", 404)
        if not found.ended:
            raise CorrectionError(
                f"run {run!r} has not ended: a correction applies to an ended run's answer (while it runs, send the "
                "new text as its final)",
                409,
            )
        runtime = self.channels.get(found.channel)
        if runtime is None:
            raise CorrectionError(f"run {run!r}: its channel {found.channel!r} is not configured here", 409)
        earlier = await self.store.corrections(run)
        if any(r.kind is CorrectionKind.RETRACT for r in earlier):
            raise CorrectionError(f"run {run!r} was retracted: its answer cannot be corrected any more", 409)
        messages = layout(answer_messages(await self.ledger.parts(run)), earlier)
        if not messages:
            raise CorrectionError(
                f"run {run!r} shows no answer message to {kind}: its report (GET /v1/runs/{{run}}) lists none "
                "confirmed",
                409,
            )
        policy = runtime.policy
        split = Splitter(policy, runtime.adapter.measure).split
        steps = plan(kind, messages, text, split=split, edits=policy.edits, reason=text or None)
        now = self._wall()
        record = CorrectionRecord(
            run=run,
            id=correction_id,
            kind=kind,
            text=text,
            fmt=policy.fmt,
            channel=found.channel,
            target=found.target,
            before=[mid for mid, _ in messages],
            steps=steps,
            created_at=now,
            updated_at=now,
            fallback=None if policy.edits else "reply",
        )
        if not policy.edits:
            for step in steps:
                step.outcome = f"{runtime.adapter.platform} cannot edit or delete a sent message"
        await self.store.save_correction(record)
        return record

    async def resume(self) -> int:
        """Apply again every correction a restart cut (state ``applying``); how many. One that fails is logged in
        its record and left for a re-sent correction."""
        resumed = 0
        for record in await self.store.open_corrections():
            async with self._lock(record.run):
                current = await self.store.correction(record.run, record.id)
                if current is None or current.state is not CorrectionState.APPLYING:
                    continue
                await self._apply(current)
                resumed += 1
        return resumed

    async def _apply(self, record: CorrectionRecord) -> CorrectionRecord:
        runtime = self.channels.get(record.channel)
        if runtime is None:
            raise CorrectionError(f"run {record.run!r}: its channel {record.channel!r} is not configured here", 409)
        target = Target.model_validate(record.target)
        with runtime.ended_run_executor(target, self._clock, self.ledger, record.run) as (executor, _):
            if record.state is not CorrectionState.APPLYING:
                for step in record.steps:  # sent again: what failed is tried again
                    if step.state is StepState.FAILED:
                        step.state = StepState.PLANNED
                record.state = CorrectionState.APPLYING
                await self._save(record)
            await _Apply(self, record, runtime, target, executor).run()
        if self.shown is not None and record.state is not CorrectionState.APPLYING:
            self.shown(record.run, shown_answer(record))
        return record

    async def _save(self, record: CorrectionRecord) -> None:
        record.updated_at = self._wall()
        await self.store.save_correction(record)


class _Apply:
    """One pass over a correction's steps (:meth:`Corrections._apply`)."""

    def __init__(
        self,
        owner: Corrections,
        record: CorrectionRecord,
        runtime: ChannelRuntime,
        target: Target,
        executor: Executor,
    ) -> None:
        self.owner, self.record, self.runtime, self.target, self.executor = owner, record, runtime, target, executor

    async def _save(self) -> None:
        await self.owner._save(self.record)

    async def run(self) -> None:
        record = self.record
        index = 0
        held = False  # a create is left to try again: the creates after it wait for that try (the chat keeps order)
        while index < len(record.steps):  # a refusal may append steps
            step = record.steps[index]
            if step.state in (StepState.PLANNED, StepState.STARTED) and not (held and step.op in CREATES):
                await self._step(index, step)
            held = held or (step.op in CREATES and step.state in (StepState.FAILED, StepState.STARTED))
            index += 1
        record.state = finished_state(record.steps)
        await self._save()

    async def _step(self, index: int, step: Step) -> None:
        if step.op in CREATES:
            await self._create(index, step)
            return
        assert step.message_id is not None
        resumed = step.state is StepState.STARTED
        step.state = StepState.STARTED
        await self._save()
        call: Call = (
            Delete(self.target, step.message_id)
            if step.op is StepOp.DELETE
            else Edit(self.target, step.message_id, step.text, self.record.fmt)
        )
        result = await self._idempotent(call)
        again = " (made again after a restart)" if resumed else ""
        if isinstance(result, Done):
            step.state = StepState.DONE
            step.outcome = (
                f"deleted{again}"
                if step.op is StepOp.DELETE
                else f"edited{again}" + ("" if result.value is not False else ": it already showed the text")
            )
            await self._save()
            return
        assert isinstance(result, NotDone | Unknown)
        error = result.error
        if isinstance(result, Unknown) or isinstance(error, TransientDeliveryError):
            step.state, step.outcome = StepState.FAILED, f"not done after {RETRIES} tries: {error}"
            await self._save()
            return
        await self._refused(step, error, gone=isinstance(error, TargetNotFoundError))

    async def _refused(self, step: Step, error: Exception, *, gone: bool) -> None:
        record = self.record
        reaction = react(record.kind, step.op, gone=gone, replied=record.fallback == "reply")
        step.state = StepState.DONE if reaction is Reaction.DONE else StepState.REFUSED
        step.outcome = f"already gone ({error})" if reaction is Reaction.DONE else f"refused: {error}"
        if reaction is Reaction.MARK:
            assert step.message_id is not None
            step.outcome += "; edited to a marker line instead"
            mark = marker(record.kind, self._reason())
            record.steps.append(Step(StepOp.MARK, message_id=step.message_id, text=mark))
        elif reaction is Reaction.REPLY:
            record.fallback = "reply"
            step.outcome += "; the correction is posted as a reply instead"
            for later in record.steps:  # the answer is left as it shows, the reply below it says it all
                if later.state is StepState.PLANNED and later.op not in CREATES:
                    later.state, later.outcome = StepState.SKIPPED, "not made: the correction is posted as a reply"
                elif later.state is StepState.PLANNED and later.op is StepOp.SEND:
                    later.state, later.outcome = StepState.SKIPPED, "not sent: the correction is posted as a reply"
            split = Splitter(self.runtime.policy, self.runtime.adapter.measure).split
            record.steps += reply_steps(record.kind, record.text, split, self._reason())
        await self._save()

    def _reason(self) -> str | None:
        """A retraction's reason (its record's text)."""
        return self.record.text or None if self.record.kind is CorrectionKind.RETRACT else None

    def _reply_target(self) -> Target:
        first = self.record.before[0] if self.record.before else None
        if first is None:
            return self.target
        reply_to: int | str = int(first) if first.isdigit() and self.runtime.adapter.platform == "telegram" else first
        return self.target.model_copy(update={"reply_to": reply_to})

    def _after_id(self) -> str | None:
        known = [mid for mid in self.record.after() if mid is not None]
        return known[-1] if known else None

    async def _create(self, index: int, step: Step) -> None:
        """Make the create ``step`` (a send or a reply): settled first when a restart cut it; an unknown outcome
        settled and followed as an answer's part is (:func:`follow`)."""
        target = self._reply_target() if step.op is StepOp.REPLY else self.target
        if step.state is StepState.STARTED and step.delivery_id is not None:  # cut by a restart: settle first
            settlement = await self._settle(target, step)
            if settlement is None or not await self._follow(index, step, target, settlement, None):
                return
        for _ in range(2):  # not stored (settled): made again at once, as an answer's part is; twice: the next try
            result = await self._send(index, step, target)
            if not isinstance(result, Unknown):
                return
            target = self._reply_target() if step.op is StepOp.REPLY else self.target  # a reply may have become a send
            settlement = await self._settle(target, step)
            if settlement is None or not await self._follow(index, step, target, settlement, result.error):
                return
        step.state, step.outcome = StepState.FAILED, "not stored, twice: sent again next time"
        await self._save()

    async def _send(self, index: int, step: Step, target: Target) -> CallResult:
        """One create of ``step`` under its delivery id (written ``started`` first); done and refused are recorded,
        an unknown outcome is returned to be settled."""
        record = self.record
        step.delivery_id = correction_delivery_id(record.run, record.id, index)
        step.after_id = self._after_id()
        step.state = StepState.STARTED
        await self._save()
        result = await self.executor.perform(SendText(target, step.text, record.fmt, step.delivery_id), final=True)
        if isinstance(result, NotDone) and _bad_markup(result.error) and record.fmt is not TextFormat.PLAIN:
            result = await self.executor.perform(
                SendText(target, step.text, TextFormat.PLAIN, step.delivery_id), final=True
            )
        if (
            isinstance(result, NotDone)
            and step.op is StepOp.REPLY
            and target.reply_to is not None
            and isinstance(result.error, TargetNotFoundError)
        ):  # the answer's first message is gone (deleted by someone): posted without the reply, once, as Telegram
            # (allow_sending_without_reply) and Discord (fail_if_not_exists false) do by themselves; Slack answers
            # a thread_ts of a deleted message with thread_not_found
            step.op = StepOp.SEND
            gone = f"the answer's first message is gone ({result.error}): sent without the reply"
            step.outcome = f"{step.outcome}; {gone}" if step.outcome else gone
            return await self._send(index, step, self.target)
        if isinstance(result, Done):
            step.state, step.message_id = StepState.DONE, str(result.value)
            done = "sent as a reply" if step.op is StepOp.REPLY else "sent after the answer's last message"
            step.outcome = f"{step.outcome}; {done}" if step.outcome and step.op in CREATES else done
            self.executor.chain.note_message(step.message_id)
            await self._save()
        elif isinstance(result, NotDone):
            error = result.error
            step.state = StepState.FAILED if isinstance(error, TransientDeliveryError) else StepState.REFUSED
            step.outcome = f"not sent: {error}"
            await self._save()
        return result

    async def _follow(
        self, index: int, step: Step, target: Target, settlement: Settlement, error: Exception | None
    ) -> bool:
        """What follows the settle of ``step``'s unknown create (:func:`follow`); ``error``: why its outcome was
        unknown, None when a restart cut it. True when the step is to be made again (not stored)."""
        platform = self.runtime.adapter.platform
        restarted = error is None
        why = "cut by a restart" if restarted else f"no answer ({error})"
        copies = sum(
            1
            for s in self.record.steps[:index]
            if s.state is StepState.UNCERTAIN and (s.op, s.part, s.text) == (step.op, step.part, step.text)
        )
        again = copies + 1 >= SENDS_MAX
        follows = follow(
            settlement.outcome, restarted=restarted, reached=error is not None and reached(error), again=again
        )
        if follows is Follow.AGAIN:
            return True
        if follows is Follow.LANDED:
            assert settlement.message_id is not None
            step.state, step.message_id = StepState.DONE, settlement.message_id
            step.outcome = f"{why}; settled: it had landed as message {settlement.message_id}"
            self.executor.chain.note_message(settlement.message_id, newest=False)
            await self._save()
            return False
        step.state = StepState.UNCERTAIN
        if follows is Follow.UNCERTAIN:  # the answer's timeout-then-continue: never a copy on a guess
            step.outcome = f"may have landed: {why}; {platform} cannot tell: not sent again " + (
                f"(sent {SENDS_MAX} times)" if again else "(it reached the platform, which most often stored it)"
            )
            await self._save()
            return False
        tell = "can tell only below a later message" if follows is Follow.AGAIN_BOUNDED else "cannot tell"
        step.outcome = f"{why}; {platform} {tell} whether it landed; {_maybe_twice(step.text)}: sent again"
        copy = Step(step.op, text=step.text, part=step.part)
        self.record.steps.insert(index + 1, copy)
        await self._save()
        if follows is Follow.AGAIN_BOUNDED:  # settled below the copy once it shows (the delivery machine's bound)
            await self._create(index + 1, copy)
            await self._bounded(target, step, copy)
        return False

    async def _bounded(self, target: Target, first: Step, copy: Step) -> None:
        """Settle ``first``'s create below ``copy``'s message (the part sent again): found -> the first stays and
        the copy is deleted; not stored -> the copy is the only one; cannot tell -> ``first`` stays uncertain (its
        report says a duplicate is possible)."""
        if copy.state is not StepState.DONE or copy.message_id is None:
            return  # the copy did not show (yet): the first stays reported
        settlement = await self._ask(target, first, before_id=copy.message_id)
        if not isinstance(settlement, Settlement) or settlement.outcome not in (
            SettleOutcome.FOUND,
            SettleOutcome.NOT_SENT,
        ):
            return
        if settlement.outcome is SettleOutcome.NOT_SENT or settlement.message_id is None:
            first.state = StepState.SKIPPED
            first.outcome = f"{first.outcome}; settled below it: not stored, message {copy.message_id} is its copy"
            await self._save()
            return
        found, second = settlement.message_id, copy.message_id
        first.message_id = found
        gone = await self._idempotent(Delete(target, second))
        if isinstance(gone, Done) or (isinstance(gone, NotDone) and isinstance(gone.error, TargetNotFoundError)):
            first.state = StepState.DONE
            first.outcome = f"{first.outcome}; settled below it: it had landed as message {found}"
            copy.state = StepState.SKIPPED
            copy.outcome = f"sent again as message {second}, deleted: the first create had landed as {found}"
        else:  # the chat shows both: said, each listed
            first.state = StepState.UNCERTAIN
            first.outcome = (
                f"{first.outcome}; settled below it: it had landed as message {found}, and the copy {second} could "
                f"not be deleted ({gone.error}): both show ({DUPLICATE})"
            )
        self.executor.chain.note_message(found, newest=False)
        await self._save()

    async def _settle(self, target: Target, step: Step) -> Settlement | None:
        """Ask the platform whether ``step``'s create landed; None when it did not answer: the step is kept
        ``started`` (the correction ``partial``), so the next try settles it before any send."""
        result = await self._ask(target, step)
        if isinstance(result, Settlement):
            return result
        step.state = StepState.STARTED
        step.outcome = f"may have landed and could not be settled ({result}): settled first on the next try"
        await self._save()
        return None

    async def _ask(self, target: Target, step: Step, before_id: str | None = None) -> Settlement | Exception:
        """One settle of ``step``'s create (through retries, :meth:`_idempotent`): what the platform said, or why it
        did not answer. ``before_id``: a later message of the sidecar's in the chat (the bound)."""
        assert step.delivery_id is not None
        record = self.record
        known = {m for m in record.before} | {m for m in record.after() if m is not None}
        pending = PendingSend(
            step.delivery_id,
            step.text,
            record.fmt,
            after_id=step.after_id,
            known_ids=frozenset(known - {before_id} if before_id else known) | self.executor.chain.known_ids(),
            exclusive=self.runtime.policy.exclusive_bot,
            before_id=before_id,
        )
        result = await self._idempotent(Settle(target, pending))
        if isinstance(result, Done) and isinstance(result.value, Settlement):
            return result.value
        return result.error if isinstance(result, NotDone | Unknown) else ValueError(f"settle answered {result}")

    async def _idempotent(self, call: Call) -> CallResult:
        """``call`` (an edit, a delete, a settle) tried through 429s, outages and unknown outcomes, up to
        :data:`RETRIES` times, waiting a 429's ``retry_after`` or a doubling backoff (at most :data:`RETRY_MAX_S`)."""
        wait = 0.5
        result: CallResult = NotDone(TransientDeliveryError("not tried"))
        for attempt in range(RETRIES):
            result = await self.executor.perform(call, final=True)
            if isinstance(result, Done):
                return result
            error = result.error
            if isinstance(result, NotDone) and not isinstance(error, TransientDeliveryError):
                if _bad_markup(error) and isinstance(call, Edit) and call.fmt is not TextFormat.PLAIN:
                    call = dataclasses.replace(call, fmt=TextFormat.PLAIN)
                    continue
                return result
            if attempt + 1 < RETRIES:
                delay = error.retry_after_s if isinstance(error, RateLimitedError) else wait
                await _maybe_await(self.owner._sleep(min(RETRY_MAX_S, delay)))
                wait = min(RETRY_MAX_S, wait * 2)
        return result


def _bad_markup(error: Exception) -> bool:
    return isinstance(error, PayloadRejectedError) and error.reason is RejectReason.BAD_FORMAT


async def _maybe_await(value: object) -> None:
    if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
        await value


__all__ = [
    "CORRECTION_HEAD",
    "DUPLICATE",
    "OPEN_STEPS",
    "CorrectionError",
    "CorrectionService",
    "Corrections",
    "Follow",
    "Reaction",
    "answer_messages",
    "correction_delivery_id",
    "finished_state",
    "follow",
    "layout",
    "marker",
    "plan",
    "react",
    "shown_answer",
]
