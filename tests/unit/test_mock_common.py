"""What the three mock servers share (mocks/common.py): the fault script and the server base."""

from __future__ import annotations

import pytest

from mocks.common import Fault, FaultScript, Hang, MockPlatform
from mocks.discord import MockDiscord
from mocks.slack import MockSlack
from mocks.telegram import MockTelegram


def test_bad_fault_scripts_are_refused() -> None:
    script = FaultScript(["sendMessage"])
    with pytest.raises(ValueError, match="known methods: sendMessage"):
        script.add_fault("sendPigeon", 1, {"status": 500})
    with pytest.raises(ValueError):
        script.add_fault("sendMessage", 0, {"status": 500})
    with pytest.raises(ValueError):
        script.add_fault("sendMessage", 1, "explode")
    with pytest.raises(ValueError, match="error status"):
        script.add_fault("sendMessage", 1, {"status": 200})
    script.add_fault("sendMessage", 1, {"status": 500})
    with pytest.raises(ValueError, match="already has a fault"):
        script.add_fault("SENDMESSAGE", 1, "timeout_after_commit")


async def test_the_nth_call_gets_its_fault_and_a_429_defaults_to_one_second() -> None:
    script = FaultScript(["sendMessage"])
    script.add_fault("sendMessage", 2, {"status": 429})
    script.add_fault("sendMessage", 3, "timeout_before_commit")
    assert await script.begin("sendMessage") is None
    assert await script.begin("sendMessage") == Fault(429, None, 1.0)
    assert await script.begin("sendMessage") is Hang.BEFORE_COMMIT


@pytest.mark.parametrize("mock_type", [MockTelegram, MockSlack, MockDiscord])
async def test_every_mock_starts_once_stops_twice_and_reads_a_case(mock_type: type[MockTelegram]) -> None:
    mock: MockPlatform = mock_type()
    with pytest.raises(RuntimeError, match="not started"):
        _ = mock.base_url
    async with mock:
        assert mock.base_url.startswith("http://127.0.0.1:")
        with pytest.raises(RuntimeError, match="already running"):
            await mock.start()
        mock.configure_from_case({"mock": {"rate_limits": "documented"}})
        assert mock.rate_limits
    await mock.stop()
