"""The Redis URL's password never shows: not in errors, not in the backend's reprs."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio.connection import Connection

from streamrelay.adapters.redis import (
    InputStream,
    LeaseKeeper,
    Leases,
    RedisBudgets,
    RedisJournal,
    RedisLedger,
    connect,
    redacted,
)
from streamrelay.adapters.redis.client import _packing_in_c
from streamrelay.core.errors import ConfigError

SECRET_URL = "redis://streamrelay:s3cret-pw@127.0.0.1:6390/0"


def test_redacted_hides_the_password_and_the_user() -> None:
    assert redacted(SECRET_URL) == "redis://***@127.0.0.1:6390/0"
    assert redacted("rediss://:p@ss@host/1?ssl_cert_reqs=none") == "rediss://***@host/1?ssl_cert_reqs=none"
    assert redacted("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert redacted("redis://[::1") == "<unparseable redis url>"


def test_a_bad_url_is_a_config_error_without_its_password() -> None:
    for url in ("http://:s3cret-pw@host", "redis://:s3cret-pw@host:port/0"):
        with pytest.raises(ConfigError) as bad:
            connect(url)
        assert "s3cret-pw" not in str(bad.value) and "***" in str(bad.value)


async def test_no_repr_shows_the_password() -> None:
    client = connect(SECRET_URL)
    leases = Leases(client)
    made = [
        client,
        leases,
        LeaseKeeper(leases, "a", 4),
        InputStream(client),
        RedisJournal(client, 1, token=3),
        RedisLedger(client, 1, token=3),
        RedisBudgets(client),
    ]
    assert not [m for m in made if "s3cret-pw" in repr(m)]
    await client.aclose()


@pytest.mark.parametrize(
    "args",
    [
        ("GET", "k"),
        ("SCRIPT LOAD", "return 1"),
        (b"CONFIG GET", "appendonly"),
        ("EVALSHA", "ab12", 2, "sr:{p1}:in", "sr:{p1}:epoch", "ünïcode ✓", 17, -3, b"\x00\xff"),
        ("SET", "k", 1.5),
        ("XADD", "k", "*", "line", "x" * 10_000),
    ],
)
def test_commands_packed_in_c_are_the_bytes_redis_py_packs(args: tuple[str | bytes | int | float, ...]) -> None:
    packed = b"".join(_packing_in_c(Connection)().pack_command(*args))
    assert packed == b"".join(Connection().pack_command(*args))


async def test_the_pool_takes_idle_connections_checked_and_waits_for_a_busy_one(redis_url: str) -> None:
    """An idle connection is handed out without redis-py's wait (client.py's _LeanAcquire), checked as redis-py
    checks it: one the server closed meanwhile is connected again, not failed on. Past ``max_connections`` a command
    waits for a free connection, and every connection goes back to the pool."""
    client = connect(redis_url, client_name="lean-pool", max_connections=2)
    other = connect(redis_url)
    try:
        assert await client.ping()
        pool = client.connection_pool
        assert len(pool._available_connections) == 1
        await other.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no")  # type: ignore[no-untyped-call]  # closes the idle one too
        assert await client.set("k", "v") and await client.get("k") == "v"  # reconnected at its acquisition
        blocked = asyncio.ensure_future(client.blpop(["never"], timeout=1))  # holds one connection for a second
        await asyncio.sleep(0.1)
        answers = await asyncio.gather(*(client.incr("n") for _ in range(20)))  # one connection left, then two
        assert sorted(answers) == list(range(1, 21))
        assert await blocked is None
        assert len(pool._in_use_connections) == 0
        assert len(pool._available_connections) == 2
    finally:
        await client.aclose()
        await other.aclose()
