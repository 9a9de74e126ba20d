"""The sampled background audit on Redis replicas (docs/audit.md): two replicas (in this process, each its own
:func:`app.replicas.serving.serve_replica` with its listeners, on one redis-server), one Slack channel against the
mock Slack, ``audit_sample = 1``, ``audit_after_s = 0``. A run's first message is deleted in the mock once shown (a
moderator, through the mock's control API); the run ends on the replica that owns its partition, whose sampler reads
every message back by itself: the run's report carries the audit with the message ``gone`` through either replica
(the other one forwards the report to the owner), and the owner's ``/metrics`` counts the drift."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamrelay.adapters.redis.client import Redis
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.config.settings import load_settings
from tests.redis.replicas import SERVICE, two_replicas, until
from tests.redis.test_failover import post_as_agent

pytestmark = pytest.mark.timeout(120)

TOKEN = "replica-audit-token"
BLOCKS = ("The refund was approved today.", "It reaches your card within 14 days.", "Anything else?")


def _ndjson(events: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps({"run": "au1", **e}) + "\n" for e in events).encode()


async def test_a_replica_audits_the_runs_that_end_on_its_partitions(
    tmp_path: Path, redis_url: str, client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    dry = DRY_RUN["slack"]
    mock: Any = dry.make_mock(False)  # its control API's URL too
    api = await mock.start()
    monkeypatch.setenv("STREAMRELAY_TOKEN", TOKEN)
    monkeypatch.setenv("AUDIT_SLACK_TOKEN", dry.token)
    monkeypatch.setenv("STREAMRELAY_SERVICE__REDIS_URL", redis_url)
    config = tmp_path / "channels.toml"
    config.write_text(
        SERVICE + "audit_sample = 1\naudit_after_s = 0\n\n"
        f'[channels.chat]\nplatform = "slack"\ntoken_env = "AUDIT_SLACK_TOKEN"\napi_base = "{api}"\n'
        'delivery = "block"\nthrottle_ms = 0\ntyping = false\n'
        "coalesce = { min_chars = 1, max_chars = 1000, idle_ms = 0 }\n"
    )
    settings = load_settings(config)
    assert settings.service.audit_sample == 1.0
    target = dry.target(native=False)
    try:
        async with (
            httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
            two_replicas(settings, client, http) as urls,
        ):
            start = {"kind": "run.start", "channel": "chat", "target": target.model_dump(exclude_none=True)}
            first = _ndjson([start, {"kind": "text", "text": BLOCKS[0]}, {"kind": "block_end"}])
            answer = await post_as_agent(http, f"{urls[0]}/v1/runs/au1/events", first)
            assert answer.status_code == 200, answer.text

            async def shown() -> list[tuple[Any, str]]:
                return list(mock.visible(target.chat_id))

            ((deleted, _),) = await until(shown, "the first block shown in the mock Slack")
            async with httpx.AsyncClient() as control:  # a moderator deletes it
                body = {"chat_id": target.chat_id, "message_id": str(deleted)}
                assert (await control.post(f"{mock.control_url}/remove", json=body)).status_code == 200
            rest: list[dict[str, Any]] = []
            for block in BLOCKS[1:]:
                rest += [{"kind": "text", "text": block}, {"kind": "block_end"}]
            rest.append({"kind": "end", "status": "ok"})
            answer = await post_as_agent(http, f"{urls[1]}/v1/runs/au1/events", _ndjson(rest))
            assert answer.status_code == 200, answer.text

            for url in urls:  # the owner answers; the other replica forwards the report to it

                async def audited(url: str = url) -> dict[str, Any] | None:
                    report: dict[str, Any] = (await http.get(f"{url}/v1/runs/au1")).json()
                    return report if "audit" in report else None

                report = await until(audited, f"the run's audit in its report through {url}")
                assert report["status"] == "delivered", report
                audit = report["audit"]
                assert audit["run"] == "au1" and audit["readable"] is True and audit["drift"] == 1, audit
                verdicts = {m["message_id"]: m["verdict"] for m in audit["messages"]}
                assert verdicts[str(deleted)] == "gone"
                assert sorted(verdicts.values()) == ["as_delivered", "as_delivered", "gone"]
            counted = 'streamrelay_audit_drift_total{kind="gone",platform="slack"} 1.0'
            scraped = [(await http.get(f"{url}/metrics")).text for url in urls]
            assert sum(counted in text for text in scraped) == 1  # on the owner's metrics only: audited once
            reads = sum(c.method == "conversations.history" for c in mock.calls)
            assert reads == len(BLOCKS)  # each message read back once, by the owner's sampler alone
    finally:
        await mock.stop()
