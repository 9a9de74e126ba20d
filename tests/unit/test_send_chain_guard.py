"""The send chain's guard: a replica that may no longer act for a conversation makes no call (issue 11: a
paused owner cannot double a message or roll one back after another replica took its partition)."""

from __future__ import annotations

import pytest

from streamrelay.core.clock import FakeClock
from streamrelay.core.delivery.send_chain import SendChain
from streamrelay.core.errors import OwnershipLostError


async def test_a_call_is_made_only_while_the_guard_allows_it() -> None:
    allowed = [True]
    made: list[str] = []
    chain = SendChain(FakeClock(), guard=lambda: allowed[0])

    async def call() -> str:
        made.append("sent")
        return "1"

    assert await chain.call(call) == "1"
    allowed[0] = False  # the lease lapsed (the process was paused past it)
    with pytest.raises(OwnershipLostError):
        await chain.call(call)
    assert made == ["sent"]  # the second call never reached the platform
    allowed[0] = True
    assert await chain.call(call) == "1"  # the chain itself is not broken
