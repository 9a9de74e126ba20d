"""Sub-agent threads (``subagents = "thread"``): each child's preview in its own thread.

Each child has its own status message in the run's conversation (its status line: started, using a tool,
done…), which anchors its thread: a platform opens one thread per message (Slack ``thread_ts``, a Discord
thread started from a message). When the child first has text, a thread is wanted under that message: the run's
delivery machine opens it once the message is shown (an :class:`~core.delivery.calls.OpenThread` call it plans and
its executor makes, through the adapter's :class:`core.ports.Threads`: a Slack thread, a Telegram reply chain, a
Discord thread), and the child's text is shown there as a preview: one message edited in place, rolled over at
the limit, finalized with the child's final text at its ``end``. This module only routes each child's content.

Where the platform has no threads (the adapter does not implement the port, or refuses for this target), or
opening one fails, the child stays a status line only (the ``status`` behaviour): never a message in the
root's conversation. Each child thread has its own reconciler (ledger run id ``<run>/<child key>``), on the
send chain of its own target, so the thread is serialized and rate limited like any conversation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any

from streamrelay.core.budgets.fair import Requester
from streamrelay.core.clock import Clock
from streamrelay.core.delivery.answer import AnswerChange
from streamrelay.core.delivery.conversation import open_conversation
from streamrelay.core.delivery.modes import ModeHandler
from streamrelay.core.delivery.reconciler import DeliveryFeed, Reconciler
from streamrelay.core.delivery.send_chain import SendChain
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.delivery.slots import Slot
from streamrelay.core.events import DeliveryMode, Source, Target
from streamrelay.core.media import MediaItem
from streamrelay.core.policy import ChannelPolicy, ReasoningPolicy
from streamrelay.core.ports import ChannelAdapter, TextFormat, Threads
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.records.report import SlotRole
from streamrelay.core.tasks import stop_all

_log = logging.getLogger("streamrelay.threads")

ANCHOR_WAIT_S = 30.0
"""How long a child waits for its status message to be shown (its thread's anchor) before it stays a status line."""


@dataclass
class _ChildThread:
    source: Source
    anchor: Slot
    text: str = ""
    opened: bool = False
    rec: Reconciler | None = None
    mode: ModeHandler | None = None
    target: Target | None = None
    final: str | None = None
    media: list[tuple[int, MediaItem]] = field(default_factory=list)
    """Its media items, each after the first ``n`` characters of ``text`` (replayed in place when the thread opens)."""


class ChildThreads:
    """The thread of every child of one run.

    Args:
        run: the run id.
        policy: the channel's policy (children are shown as ``preview``, reasoning hidden).
        adapter: the channel adapter; threads exist only if it implements :class:`core.ports.Threads`.
        target: the run's target (where the children's status messages go).
        root: the run's slot book (the children's status messages are its slots).
        chain_for: the send chain of a target (the channel's), and ``release`` when the run is over.
        ledger: the durable record.
        clock: the injected clock.
        open_thread: has the root's delivery machine open a thread with a title under a slot's message once it is
            shown, within a wait in seconds for that, and gives where its messages go, or None
            (:meth:`Reconciler.open_thread <core.delivery.reconciler.Reconciler.open_thread>`): woken by each call's
            outcome, never polled.
        feed_for: where the calls' outcomes in a child's thread go (for watchers).
        retry_window_s: how long calls safe to retry are retried through an outage (seconds).
    """

    def __init__(
        self,
        *,
        run: str,
        policy: ChannelPolicy,
        adapter: ChannelAdapter,
        target: Target,
        root: SlotBook,
        chain_for: Callable[[Target], SendChain],
        release: Callable[[Target], None],
        ledger: Ledger,
        clock: Clock,
        open_thread: Callable[[Slot, str, float], Awaitable[Target | None]],
        feed_for: Callable[[Source], DeliveryFeed] | None = None,
        retry_window_s: float = 600.0,
    ) -> None:
        self._run = run
        self._policy = replace(policy, delivery=DeliveryMode.PREVIEW, reasoning=ReasoningPolicy.HIDDEN)
        self._adapter = adapter
        self._threads = adapter if isinstance(adapter, Threads) else None
        self._target = target
        self._root = root
        self._chain_for = chain_for
        self._release = release
        self._ledger = ledger
        self._clock = clock
        self._feed_for = feed_for
        self._retry_window_s = retry_window_s
        self._open_thread = open_thread
        self._children: dict[str, _ChildThread] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.refusal = self._threads.thread_refusal(target) if self._threads is not None else "no threads"

    @property
    def available(self) -> bool:
        """True when children can have threads here."""
        return self.refusal is None

    def line(self, source: Source, text: str) -> None:
        """Show a child's status line as its own message (created at the child's first line)."""
        child = self._children.get(source.key)
        if child is None:
            anchor = self._root.claim_slot(SlotRole.STATUS, text, TextFormat.PLAIN)
            child = self._children[source.key] = _ChildThread(source, anchor)
        else:
            self._root.set_text(child.anchor, text)

    def changed(self, source: Source, message: int, change: AnswerChange) -> None:
        """A child's answer text changed (its messages as one text): show it in its thread (opened on first
        text). Call :meth:`line` for the child first."""
        child = self._children[source.key]
        if not child.opened:
            child.opened = True
            self._spawn(self._open(child))
        child.text = change.text if change.reset else child.text + change.text
        if child.mode is not None:
            child.mode.on_answer(change, message)

    def media(self, source: Source, item: MediaItem) -> None:
        """A child's media item, after its text so far: its own message in its thread (opened on first text or
        media). Call :meth:`line` for the child first."""
        child = self._children[source.key]
        if not child.opened:
            child.opened = True
            self._spawn(self._open(child))
        child.media.append((len(child.text), item))
        if child.mode is not None:
            child.mode.on_media(item, child.text)

    def ended(self, source: Source, final_text: str) -> None:
        """A child ended: its thread shows ``final_text`` (its final message), once."""
        child = self._children.get(source.key)
        if child is None:
            return
        child.final = final_text
        if child.mode is not None:
            child.mode.finalize(final_text)

    async def finish(self) -> None:
        """The run ends: wait for threads still opening, then deliver every thread's last state."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for child in self._children.values():
            if child.rec is None:
                continue
            if child.final is None and child.mode is not None:
                child.mode.finalize(child.text)
            await child.rec.finish()
            assert child.target is not None
            self._release(child.target)
            # A thread cut at the message limit is on the run's report: its status line's part carries the cut.
            cut = any(slot.cut is not None for slot in child.rec.book.slots)
            self._root.mark_cut(child.anchor, cut, f"{child.source.agent_id}'s thread")

    async def cancel(self) -> None:
        """Stop without finalizing (service shutdown)."""
        await stop_all(list(self._tasks))
        for child in self._children.values():
            if child.rec is not None:
                await child.rec.cancel()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _open(self, child: _ChildThread) -> None:
        if self._threads is None or self.refusal is not None:
            return
        anchor = child.anchor
        if anchor.over_limit:  # the run's message limit left no status message for this child: nothing to anchor to
            _log.warning("run %s: no status message to anchor %s: it stays a status line", self._run, child.source.key)
            return
        target = await self._open_thread(anchor, f"{child.source.agent_id}", ANCHOR_WAIT_S)
        if target is None:
            why = anchor.thread_error or "its status message was not shown"
            _log.warning("run %s: no thread for %s (%s): it stays a status line", self._run, child.source.key, why)
            return
        conversation = open_conversation(
            run=f"{self._run}/{child.source.key}",
            policy=self._policy,
            adapter=self._adapter,
            chain=self._chain_for(target),
            target=target,
            ledger=self._ledger,
            clock=self._clock,
            retry_window_s=self._retry_window_s,
            thread=True,
            feed=self._feed_for(child.source) if self._feed_for is not None else None,
            requester=Requester.of(self._run),  # a thread asks for the bot's budget as its run
        )
        rec = conversation.rec
        rec.restore(await self._ledger.parts(rec.run))  # after a restart: edit what the thread shows, never resend
        child.rec, child.target = rec, target
        child.mode = conversation.mode
        _replay(child, child.mode)
        if child.final is not None:
            child.mode.finalize(child.final)
        rec.start()


def _replay(child: _ChildThread, mode: ModeHandler) -> None:
    """What the child showed before its thread opened, into the thread's new mode: its text with its media items in
    their places (an offset past a text that was replaced since is read as its end)."""
    start = 0
    for offset, item in child.media:
        offset = max(start, min(offset, len(child.text)))
        if offset > start:
            mode.on_answer(AnswerChange(child.text[start:offset]), 0)
        mode.on_media(item, child.text[:offset])
        start = offset
    if len(child.text) > start:
        mode.on_answer(AnswerChange(child.text[start:]), 0)
