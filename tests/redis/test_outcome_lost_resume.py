"""A create's outcome that the ledger did not record (the primary killed between the call and the write) must not
make the resumed run skip the message that create stored (chaos seed 1, 60 runs, 4 failovers: chaos-1-00006's first
Telegram preview showed twice and the report said delivered).

The sequence: the intent of slot 0's create is written (durable), sendMessage stores message 1, the primary dies,
``record_outcome`` fails, the partition's runs stop and resume in the same process. The ledger has the intent
without an outcome, so the run settles the create by probing ids (Telegram, exclusive bot); the conversation's send
chain, kept by the channel across the resume, had noted message 1 as known when the call was answered, and a
known id is never probed: the settle skipped message 1, found nothing, the part was sent again (message 2) and the
bounded settle had no candidate left (``not_sent``): two copies, one reported.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, cast

import pytest

import streamrelay.app.replicas.owner as owner_module
from streamrelay.adapters.redis import InputStream
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.replicas.owner import AckingJournal
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.errors import StoreUnavailableError
from streamrelay.core.events import DeliveryMode, Target
from streamrelay.core.ports import PendingSend, Settlement, SettleOutcome
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.run.relay import Relay
from tests.redis.owners import ANSWER, answer_entries, partition_owner
from tests.unit.fakes import FakeAdapter
from tests.unit.test_run_controller import policy

PARTITION = 3


class _ProbingAdapter(FakeAdapter):
    """Settles like Telegram's exclusive bot in a private chat (:mod:`adapters.telegram.settle`): ids after
    ``after_id`` are probed, ``known_ids`` skipped; without ``before_id`` nothing found is ``needs_bound``, with it
    ``not_sent``. ``probed``: every id it looked at."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.probed: list[int] = []

    async def settle_send(self, target: Target, pending: PendingSend) -> Settlement:
        after = int(pending.after_id) if pending.after_id is not None else 0
        known = {int(k) for k in pending.known_ids}
        end = int(pending.before_id) if pending.before_id is not None else after + 4
        for candidate in range(after + 1, end):
            if candidate in known:
                continue
            self.probed.append(candidate)
            if self.messages.get(str(candidate)) == pending.text.strip():
                return Settlement(SettleOutcome.FOUND, str(candidate))
        return Settlement(SettleOutcome.NEEDS_BOUND if pending.before_id is None else SettleOutcome.NOT_SENT)


class _OutcomeLostOnce:
    """The partition's fenced ledger whose first ``record_outcome`` meets a Redis that is gone (the primary
    killed after the call was answered): nothing written, the write raises."""

    failed = False

    def __init__(self, inner: Ledger) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def record_outcome(self, *args: Any, **kwargs: Any) -> Any:
        if not _OutcomeLostOnce.failed:
            _OutcomeLostOnce.failed = True
            raise StoreUnavailableError("Redis did not answer ledger.record_outcome (ConnectionError)")
        return await self.inner.record_outcome(*args, **kwargs)


async def test_a_create_whose_outcome_was_not_recorded_is_found_by_the_resumed_run_not_sent_again(
    client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(owner_module, "RETRY_S", 0.05)
    monkeypatch.setattr(_OutcomeLostOnce, "failed", False)
    clock = MonotonicClock()
    adapter = _ProbingAdapter(clock)
    chat_policy = replace(policy(DeliveryMode.BLOCK, block_min=10), name="chat", exclusive_bot=True)
    channels = {"chat": ChannelRuntime(chat_policy, adapter)}  # one per process: its send chains outlive a resume

    def make_relay(ledger: Ledger, journal: AckingJournal) -> Relay:
        return Relay(channels, cast(Ledger, _OutcomeLostOnce(ledger)), clock, journal=journal)

    owner = await partition_owner(client, PARTITION, make_relay)
    await InputStream(client).append(PARTITION, answer_entries("r6", 7000006))
    owner.start()
    try:
        report = None
        deadline = asyncio.get_running_loop().time() + 10
        while asyncio.get_running_loop().time() < deadline:
            report = await owner.relay.report("r6")
            if report is not None and report.done:
                break
            await asyncio.sleep(0.05)
        assert _OutcomeLostOnce.failed  # the first create's outcome was lost
        assert report is not None and report.done, report
        assert adapter.chat() == ANSWER  # whole, once, in order: not the first paragraph twice
        assert 1 in adapter.probed  # the settle looked at the message the lost outcome named
        assert str(report.status) == "delivered", report
    finally:
        await owner.stop()
