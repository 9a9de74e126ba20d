"""One conversation's delivery stages, built in one place for a run's root and for each sub-agent thread.

A conversation is a target (a chat, a channel, a thread) with its send chain: a delivery mode decides what it
should show (slots), a reconciler makes the platform show it (planner → calls through the chain → ledger). The
root's conversation uses the channel's delivery mode; a sub-agent's thread is always a ``preview`` (its one
message grows in place), without native streaming or typing indicators.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from streamrelay.core.budgets.fair import Requester
from streamrelay.core.clock import Clock
from streamrelay.core.delivery.cap import MessageLimit
from streamrelay.core.delivery.modes import ModeHandler, make_mode, native_streaming
from streamrelay.core.delivery.reconciler import DeliveryFeed, Reconciler
from streamrelay.core.delivery.send_chain import SendChain
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.events import DeliveryMode, Target
from streamrelay.core.policy import ChannelPolicy, Splitter
from streamrelay.core.ports import ChannelAdapter, StopControl
from streamrelay.core.records.ledger import Ledger

_THROTTLED = (DeliveryMode.PREVIEW, DeliveryMode.NATIVE, DeliveryMode.PROGRESS)
"""Modes whose calls are edits of a growing message: at most one per ``throttle_s``."""


@dataclass(frozen=True)
class Conversation:
    """A conversation's stages: ``mode`` (what to show) writes the ``book`` (desired parts); ``rec`` (the
    reconciler) makes the platform show it."""

    book: SlotBook
    mode: ModeHandler
    rec: Reconciler


def open_conversation(
    *,
    run: str,
    policy: ChannelPolicy,
    adapter: ChannelAdapter,
    chain: SendChain,
    target: Target,
    ledger: Ledger,
    clock: Clock,
    retry_window_s: float,
    thread: bool = False,
    feed: DeliveryFeed | None = None,
    requester: Requester | None = None,
    control: StopControl | None = None,
) -> Conversation:
    """Build the stages of one conversation (not started: the caller restores the ledger's parts and starts it).

    Args:
        run: the ledger's run id for this conversation (``<run>/<child key>`` for a sub-agent's thread).
        policy: the channel's policy (``delivery`` decides the mode; a thread is always ``preview``; ``max_messages``
            limits the conversation's messages, a thread's apart from the root's: :mod:`core.delivery.cap`).
        adapter: the channel adapter.
        chain: the send chain of ``target``.
        target: where the messages go.
        ledger: records intents and outcomes.
        clock: the injected clock.
        retry_window_s: how long calls safe to retry are retried through an outage (seconds).
        thread: a sub-agent's thread: ``preview``, no native streaming, no typing indicator.
        feed: where each call's outcome goes for watchers.
        requester: who asks for the bot's shared budgets (None: ``run``'s client and run; a thread names its run's).
        control: the Stop control the newest live message carries (None: none; a thread never has one).
    """
    if thread:
        policy = replace(policy, delivery=DeliveryMode.PREVIEW, typing_every_s=None)
    native = None if thread else native_streaming(policy, adapter, target)
    throttle_s = policy.throttle_s if policy.delivery in _THROTTLED else 0.0
    book = SlotBook(run, throttle_s, native is not None, MessageLimit.of(policy), adapter.measure)
    rec = Reconciler(
        book=book,
        adapter=adapter,
        chain=chain,
        target=target,
        ledger=ledger,
        clock=clock,
        native=native,
        typing_every_s=policy.typing_every_s,
        retry_window_s=retry_window_s,
        exclusive_bot=policy.exclusive_bot,
        feed=feed,
        requester=requester,
        control=None if thread else control,
    )
    return Conversation(book, make_mode(policy, book, Splitter(policy, adapter.measure), clock), rec)
