"""The runnable example of docs/subagents.md (examples/parent_loop.py) against a real sidecar and the mock Bot API,
with the shipped action catalog (config/actions.toml)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from examples.parent_loop import main
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.actions import load_actions
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.telegram import MockTelegram
from tests.integration.conftest import BOT_TOKEN, INGEST_TOKEN

pytestmark = pytest.mark.timeout(60)


async def test_the_parent_loop_example_runs_search_at_once_and_email_after_the_commit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    mock = MockTelegram(rate_limits=True)
    channel = ChannelSettings.model_validate({"platform": "telegram", "api_base": await mock.start()})
    catalog, validate = load_actions()
    relay = Relay(
        {"telegram": make_runtime("telegram", channel, SecretStr(BOT_TOKEN))},
        MemoryLedger(),
        MonotonicClock(),
        catalog=catalog,
        validator=validate,
    )
    sidecar = Sidecar(relay, token=INGEST_TOKEN)
    try:
        report = await main(await sidecar.start(), INGEST_TOKEN, 1001)
    finally:
        await sidecar.stop()
        await relay.close()
        await mock.stop()
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("search: run (search is idempotent")
    assert out[1] == "researcher says: Refunds take 14 days."
    assert out[2].startswith("send_email: wait (send_email is irreversible; it waits for the run's commit point")
    assert out[3] == "send_email after the commit: run"
    assert out[4].startswith("delivery: delivered") and report.status == "delivered"
    assert [text for _, text in mock.visible(1001)] == [
        "↳ researcher: done",
        "Refunds take 14 days. I have emailed you the details.",
    ]
