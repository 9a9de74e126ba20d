"""What the three mock servers share (mocks/common.py): the fault script and the server base."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from pydantic import SecretStr

from streamrelay.adapters.registry import REGISTRY
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import make_adapter
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import FakeClock
from streamrelay.core.events import Target
from streamrelay.core.ports import ChannelAdapter, TextFormat
from streamrelay.mocks.common import Fault, FaultScript, Hang, MockPlatform, parse_answer
from streamrelay.mocks.discord import MockDiscord
from streamrelay.mocks.matrix import MockMatrix
from streamrelay.mocks.slack import MockSlack
from streamrelay.mocks.teams import MockTeams
from streamrelay.mocks.telegram import MockTelegram
from streamrelay.mocks.whatsapp import MockWhatsApp


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


@pytest.mark.parametrize("mock_type", [MockTelegram, MockSlack, MockDiscord, MockMatrix, MockWhatsApp, MockTeams])
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


SEND_METHOD = {name: dry.create_method for name, p in REGISTRY.items() if (dry := p.dry_run) is not None}
"""Each platform's create method, from its registration (Telegram sendMessage, ..., Matrix send)."""


@dataclass
class Rig:
    mock: MockPlatform
    adapter: ChannelAdapter
    target: Target
    send: str


@pytest.fixture(params=sorted(DRY_RUN))
async def rig(request: pytest.FixtureRequest) -> AsyncIterator[Rig]:
    """Each platform's mock and the real SDK's adapter on it (the way the mock is meant to be driven)."""
    dry = DRY_RUN[request.param]
    mock = dry.make_mock(False)
    settings = ChannelSettings.model_validate(
        {"platform": request.param, "api_base": await mock.start(), "send_timeout_ms": 10_000}
    )
    adapter = make_adapter("c", settings, SecretStr(dry.token))
    try:
        yield Rig(mock, adapter, dry.target(), SEND_METHOD[request.param])
    finally:
        await adapter.close()
        await mock.stop()


async def test_stop_releases_a_hanging_call_at_once(rig: Rig) -> None:
    rig.mock.add_fault(rig.send, 1, "timeout_before_commit")  # would hang for 30 s
    pending = asyncio.ensure_future(rig.adapter.send_text(rig.target, "x", TextFormat.PLAIN))
    while not rig.mock.calls:
        await asyncio.sleep(0.01)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await rig.mock.stop()
    await asyncio.gather(pending, return_exceptions=True)
    assert loop.time() - started < 5  # released, not the scripted 30 s


async def test_latency_applies_to_the_scripted_call_only(rig: Rig) -> None:
    rig.mock.set_latency(rig.send, [400, 0])
    loop = asyncio.get_running_loop()
    started = loop.time()
    await rig.adapter.send_text(rig.target, "slow", TextFormat.PLAIN)
    slow_s = loop.time() - started
    started = loop.time()
    await rig.adapter.send_text(rig.target, "fast", TextFormat.PLAIN)
    assert slow_s >= 0.4
    assert loop.time() - started < slow_s


def test_after_commit_comes_from_the_fault_object_not_the_reply() -> None:
    script = FaultScript(["sendMessage"])
    script.configure_from_case(
        {
            "faults": [
                {"method": "sendMessage", "nth": 1, "reply": {"status": 502}, "after_commit": True},
                {"method": "sendMessage", "nth": 2, "reply": {"status": 502}},
                {"method": "sendMessage", "nth": 3, "reply": "reset", "after_commit": True},
            ]
        }
    )

    assert parse_answer({"status": 502}, after_commit=True) == Fault(502, None, None, after_commit=True)
    assert script.scripted("sendMessage", 1) and script.scripted("sendMessage", 3)
    with pytest.raises(ValueError, match="belongs to the fault object"):
        script.add_fault("sendMessage", 4, {"status": 502, "after_commit": True})
    with pytest.raises(ValueError, match="cannot be after_commit"):
        script.add_fault("sendMessage", 4, "timeout_before_commit", after_commit=True)
    with pytest.raises(ValueError, match="true or false"):
        script.configure_from_case(
            {"faults": [{"method": "sendMessage", "nth": 5, "reply": "reset", "after_commit": 1}]}
        )


async def test_the_script_answers_after_commit_faults_and_resets() -> None:
    script = FaultScript(["sendMessage"])
    script.add_fault("sendMessage", 1, {"status": 502}, after_commit=True)
    script.add_fault("sendMessage", 2, "reset")
    script.add_fault("sendMessage", 3, "reset", after_commit=True)

    answers = [await script.begin("sendMessage") for _ in range(3)]

    assert answers == [Fault(502, None, None, after_commit=True), Hang.RESET, Hang.RESET_AFTER_COMMIT]
    assert [isinstance(a, Hang) and a.commits for a in answers] == [False, False, True]


async def test_an_outage_covers_its_window_and_methods_and_overrides_faults() -> None:
    clock = FakeClock(start=10.0)
    script = FaultScript(["sendMessage", "getMe"], clock=clock.now)
    script.add_fault("sendMessage", 2, {"status": 429})
    outage = script.set_outage(5, {"status": 503}, methods=["SENDMESSAGE"])

    first = await script.begin("sendMessage")
    other = await script.begin("getMe")
    second = await script.begin("sendMessage")  # its own 429 is overridden by the outage
    clock.advance(5.0)
    after = await script.begin("sendMessage")

    assert (outage.start_s, outage.until_s, outage.methods) == (10.0, 15.0, frozenset({"sendMessage"}))
    assert (first, other, second, after) == (Fault(503), None, Fault(503), None)
    assert script.count("sendMessage") == 3
    with pytest.raises(ValueError, match="positive number of seconds"):
        script.set_outage(0, "reset")
    with pytest.raises(ValueError, match="unknown method"):
        script.set_outage(1, "reset", methods=["sendPigeon"])


async def test_latency_after_n_calls_starts_at_call_n_plus_one() -> None:
    script = FaultScript(["sendMessage"])
    script.set_latency("sendMessage", [200], after=1)
    loop = asyncio.get_running_loop()

    started = loop.time()
    await script.begin("sendMessage")
    first_s = loop.time() - started
    started = loop.time()
    await script.begin("sendMessage")

    assert first_s < 0.1
    assert loop.time() - started >= 0.2
    with pytest.raises(ValueError, match="milliseconds"):
        script.set_latency("sendMessage", [-5])
