"""A replica that does not own a run, asked for its report while Redis is down, answers 503 with ``Retry-After``
(the owner cannot be found), never 500 (issue 24, item 6). A real redis-server is started and stopped."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from streamrelay.adapters.ingest_http.owner_proxy import OwnerProxy
from streamrelay.adapters.redis import InputStream, RunIndex, connect
from streamrelay.app.replicas.front import ReplicaFront
from streamrelay.app.replicas.service import ReplicaService
from tests.redis.conftest import NO_REDIS, _start

pytestmark = pytest.mark.timeout(60)


async def _here(scope: Scope, receive: Receive, send: Send) -> None:
    raise AssertionError("a run this replica does not own is never answered here")


async def test_a_non_owner_answers_a_report_503_with_retry_after_while_redis_is_down(tmp_path: Path) -> None:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip(NO_REDIS)
    server, port = _start(binary, tmp_path)
    client = connect(f"redis://127.0.0.1:{port}/0", socket_timeout_s=2.0)
    try:
        front = ReplicaFront({}, InputStream(client), RunIndex(client), 16, local=lambda p: None)

        def make_relay(*_: Any) -> Any:
            raise AssertionError("no partition is taken here")

        service = ReplicaService(client, front, make_relay, partitions=16, lease_ttl_s=10, drain_s=1)
        await RunIndex(client).claim("elsewhere-1", 5)  # another replica's run
        server.terminate()
        server.wait(timeout=10)

        proxy = OwnerProxy(_here, service.locate, patience_s=0.3)
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=proxy), base_url="http://r") as http:
                for path in ("/v1/runs/elsewhere-1", "/v1/runs/elsewhere-1/pipeline", "/v1/runs/never-started"):
                    answer = await http.get(path)
                    assert answer.status_code == 503, (path, answer.text)
                    assert answer.headers["Retry-After"] == "1"
                    assert "Redis did not answer" in answer.json()["error"], answer.text
        finally:
            await proxy.close()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        await client.aclose()
