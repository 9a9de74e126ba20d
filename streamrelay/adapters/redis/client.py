"""The Redis connection and the Lua scripts' plumbing shared by the lease, journal, ledger and budget modules.

Every module takes a ``redis.asyncio.Redis`` made by :func:`connect` (``decode_responses=True``: replies are
``str``); none of them owns it, so one connection pool serves them all and the caller closes it.

The URL may hold a password (``redis://:secret@host``): it is never logged nor put in an error or a ``repr``;
:func:`redacted` gives the form that may be shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from streamrelay.adapters.redis.errors import FencedError
from streamrelay.core.errors import ConfigError, StoreUnavailableError

Redis = aioredis.Redis

FENCE_CHECK = """
local fence_now = redis.call('GET', KEYS[1])
if ARGV[1] ~= '' and fence_now ~= ARGV[1] then
  return redis.error_reply('FENCED ' .. (fence_now or ''))
end
"""
"""The prelude of every fenced write: ``KEYS[1]`` is the partition's fencing-token key, ``ARGV[1]`` the writer's
token (``''``: an unfenced writer, e.g. a journal append by a replica that does not own the partition). A stale
token stops the script before any write with an error reply that :meth:`Script.fenced` turns into
:class:`FencedError`. Lua scripts run atomically: no other command runs between the check and the writes."""


def redacted(url: str) -> str:
    """``url`` with its password (and a username that could be a token) replaced by ``***``."""
    try:
        parts = urlsplit(url)
        if parts.password is None and parts.username is None:
            return url
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, parts.fragment))
    except ValueError:
        return "<unparseable redis url>"


def connect(
    url: str, *, client_name: str = "streamrelay", socket_timeout_s: float = 30.0, max_connections: int = 64
) -> Redis:
    """A client for ``url`` (``redis://``, ``rediss://`` or ``unix://``), connected lazily at the first command.

    Args:
        url: the Redis URL, which may hold a password (never shown).
        client_name: the connection's name in ``CLIENT LIST``.
        socket_timeout_s: how long one reply may take; keep it above the longest ``block_ms`` of a stream read. Also
            how long a command waits for a free connection.
        max_connections: connections at most (commands wait for a free one). Parsing uses hiredis (C) when it is
            installed, as the project's dependencies have it.

    Raises:
        ConfigError: ``url`` is not a Redis URL (shown redacted).
    """
    try:
        # A blocking pool: hundreds of runs writing their ledgers at once wait for one of the connections rather
        # than fail (redis-py's default pool raises past 100); the partitions' blocking stream reads hold one each.
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=max_connections,
            timeout=socket_timeout_s,
            decode_responses=True,
            client_name=client_name,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=5.0,
            health_check_interval=30,
            # A connection left from before a Redis restart fails at its first use: reconnect and send again (a
            # refused or reset connection; never a timeout, whose command may have run).
            retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), 3, supported_errors=(RedisConnectionError,)),
        )
    except ValueError:
        raise ConfigError(f"redis_url is not a Redis URL: {redacted(url)}") from None
    return aioredis.Redis.from_pool(pool)  # the client owns the pool: aclose() closes both


class Script:
    """One Lua script registered on a client (EVALSHA, loaded again after a server restart).

    Args:
        client: the client it runs on.
        source: the Lua text.
        name: for errors.
    """

    def __init__(self, client: Redis, source: str, name: str) -> None:
        self._script = client.register_script(source)
        self.name = name

    def __repr__(self) -> str:
        return f"Script({self.name!r})"

    async def __call__(self, keys: Sequence[str], args: Sequence[str | int | float]) -> Any:
        """Run the script; its reply as Redis gives it (``str``, ``int``, lists, ``None``).

        Raises:
            redis.exceptions.RedisError: the server or the connection failed.
        """
        return await self._script(keys=list(keys), args=list(args))

    async def fenced(
        self, partition: int, token: int | None, keys: Sequence[str], args: Sequence[str | int | float]
    ) -> Any:
        """Run a script that starts with :data:`FENCE_CHECK` (``keys[0]`` the fence key); ``token`` None runs it
        unfenced.

        Raises:
            FencedError: the partition's fencing token is not ``token``: nothing was written.
            core.errors.StoreUnavailableError: the connection failed or timed out (the write may or may not have
                been applied: the run stops and resumes from the journal).
            redis.exceptions.RedisError: the server refused the script.
        """
        try:
            return await self(keys, ["" if token is None else str(token), *args])
        except (RedisConnectionError, RedisTimeoutError) as exc:
            raise StoreUnavailableError(f"Redis did not answer {self.name} ({type(exc).__name__})") from None
        except ResponseError as exc:
            message = str(exc)
            if not message.startswith("FENCED"):
                raise
            current = message.removeprefix("FENCED").strip()
            raise FencedError(partition, token, int(current) if current.isdigit() else None) from None
