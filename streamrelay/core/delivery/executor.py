"""The executor: the one place a conversation's platform calls are made.

Every call of a conversation goes through its executor, whoever decided it (the delivery machine's message parts,
the typing indicator, a sub-agent's thread, the Stop control)::

    intent ─▶ ledger          (a message part's call: recorded before it is made; a restart settles it)
    call   ─▶ send chain      (one call at a time, 429 pauses; the rate budgets asked once: the grant the
                               caller got when the call was due, else asked here)
           ─▶ adapter.perform (one attempt; its outcome a value: done, not done, unknown)
    outcome ─▶ back to the machine ─▶ ledger (the part as it now stands, with the outcome's label)

An outcome the ledger fails to record (Redis gone between the call and the write) raises after the send chain
forgets the message ids that outcome made known: the run resumes from the ledger, which has the intent alone, and
its settle must be free to probe the message the create stored (a known id is never probed).

Metrics and call logs watch ``perform`` (the adapter's ``observer``), so every call is counted in one place.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from streamrelay.core.budgets.fair import Requester
from streamrelay.core.delivery.calls import Call, CallResult, NotDone
from streamrelay.core.delivery.send_chain import Grant, SendChain
from streamrelay.core.errors import DeliveryError
from streamrelay.core.ports import ChannelAdapter, PendingSend
from streamrelay.core.records.ledger import Ledger, PartRecord
from streamrelay.core.records.report import SlotRole
from streamrelay.core.run.timeline import TIMELINE
from streamrelay.core.trace import CALL_PART, RUN_SPAN


@dataclass(frozen=True, slots=True)
class Intent:
    """A message part's call as the ledger records it before the call is made (:meth:`Ledger.record_intent`).

    Attributes:
        part: the part's index in the run's ledger.
        role: the part's role (answer, status, media, ...).
        op: the machine's name for the call (``send``, ``edit``, ``settle``, ...).
        text: the text the call shows.
        pending: a create's delivery (its delivery id, what it sent, the bounds a settle needs), else None.
    """

    part: int
    role: SlotRole
    op: str
    text: str
    pending: PendingSend | None = None


Applied = tuple[PartRecord, str, str]
"""What the machine made of an outcome, for the ledger: the part as it now stands, the outcome's label, a detail."""


class Executor:
    """Makes one conversation's calls (module docstring).

    Args:
        adapter: the channel adapter (its :meth:`~core.ports.ChannelAdapter.perform`).
        chain: the conversation's send chain.
        ledger: where message parts' intents and outcomes are recorded.
        run: the ledger's run id for this conversation.
        requester: who asks for the bot's shared budgets (its client and run).
    """

    __slots__ = ("_ledger", "adapter", "chain", "requester", "run")

    def __init__(
        self, *, adapter: ChannelAdapter, chain: SendChain, ledger: Ledger, run: str, requester: Requester
    ) -> None:
        self.adapter = adapter
        self.chain = chain
        self._ledger = ledger
        self.run = run
        self.requester = requester

    async def perform(
        self,
        call: Call,
        *,
        final: bool = False,
        intent: Intent | None = None,
        apply: Callable[[CallResult], Applied] | None = None,
        grant: Grant | None = None,
        first: Callable[[], list[PartRecord]] | None = None,
    ) -> CallResult:
        """Make ``call``: its ``intent`` in the ledger first (when it is a message part's), then the call through
        the send chain, then ``apply`` (the machine takes the outcome) and the part's new state in the ledger.

        Args:
            call: the platform call.
            final: part of a run's finalization (goes before previews when a shared budget is short).
            intent: the ledger's record of the call (None: not a message part's call, e.g. typing, a thread, a
                Stop move: paced and metered, not journaled).
            apply: hands the outcome to the machine; returns what the ledger records (needs ``intent``).
            grant: the rate budgets' yes, asked when the call was due (:meth:`SendChain.grant`), spent by the chain;
                None: the chain asks the budgets.
            first: the records ``apply`` made that the ledger must hold before this outcome (a create that could
                not be settled, reported as a part of its own while the part goes on as a new message): written
                before the outcome, so a process killed in between never leaves a part sent anew without the
                report of the copy that may show (at worst that copy is reported twice after the restart).

        Returns:
            The outcome. A call the chain would not make (this replica lost the conversation, the shared budget
            store failed with a delivery error) is :class:`~core.delivery.calls.NotDone`.
        """
        ledger = self._ledger
        call_id = None
        if intent is not None:
            call_id = await ledger.record_intent(
                self.run, intent.part, intent.role, intent.op, intent.text, intent.pending
            )
        adapter = self.adapter
        # the run's delivery timeline (core/run/timeline.py): one small tuple per call
        timeline = TIMELINE.get()
        started = time.time() if timeline is not None else 0.0
        # a traced run's part call: its span goes under the part's (core/trace.py); untraced, one read
        part = None if intent is None or RUN_SPAN.get() is None else CALL_PART.set((self.run, intent.part, intent.role))
        try:
            result = await self.chain.call(
                lambda: adapter.perform(call), call.kind, final=final, requester=self.requester, grant=grant
            )
        except DeliveryError as exc:  # not made: ownership lost, or the shared budgets failed
            result = NotDone(exc)
        finally:
            if part is not None:
                CALL_PART.reset(part)
        label = ""
        if apply is not None:
            self.chain.take_noted()  # ids noted elsewhere (a settle's probe) are not this outcome's
            record, label, detail = apply(result)
            noted = self.chain.take_noted()  # the ids this outcome made known (apply does not await)
            if call_id is not None:
                try:
                    for earlier in first() if first is not None else ():
                        await ledger.save_part(earlier)
                    await ledger.record_outcome(call_id, record, label, detail)
                except BaseException:
                    # The ledger keeps the intent without this outcome: the run resumes and settles the create
                    # again, in this process with this chain. A known id is never probed, so the message this
                    # create stored would be skipped and the part sent twice: know only what the ledger knows.
                    self.chain.forget(noted)
                    raise
        if timeline is not None:
            if intent is not None:
                timeline.call(started, self.run, intent.part, str(intent.role), intent.op, call.method, result, label)
            else:
                timeline.call(started, self.run, None, None, str(call.kind), call.method, result)
        return result
