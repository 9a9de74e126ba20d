"""The Redis connection and the Lua scripts' plumbing shared by the lease, journal, ledger and budget modules.

Every module takes a ``redis.asyncio.Redis`` made by :func:`connect` (one URL) or :func:`connect_sentinel` (a
primary found through Redis Sentinel, followed across a failover); ``decode_responses=True``: replies are ``str``.
None of them owns it, so one connection pool serves them all and the caller closes it.

Writes that must survive a failover (a lease grant's fencing token, a ledger intent, an accepted input line, the
epoch markers) wait for replicas to acknowledge them: :class:`Durability` (``WAIT``, pipelined after the write in
the same round trip). Redis replicates asynchronously: without that wait a primary killed right after a write
takes it along, and the promoted replica hands out a fencing token a second time or forgets a send.

The URL may hold a password (``redis://:secret@host``): it is never logged nor put in an error or a ``repr``;
:func:`redacted` gives the form that may be shown.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import hiredis
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.asyncio.connection import SSLConnection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from streamrelay.adapters.redis.errors import FencedError, NotReplicatedError, StalePrimaryError
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
    """``url`` with its password (and a username that could be a token) replaced by ``***``; a string that is not a
    ``scheme://...`` URL is not shown at all (it may be a password alone, or a URL mistyped around one)."""
    try:
        parts = urlsplit(url)
        if not parts.scheme or not url.startswith(f"{parts.scheme}://"):
            return "<not shown: not a redis://host:port/db URL>"
        if parts.password is None and parts.username is None:
            return url if "@" not in url else "<not shown: not a redis://host:port/db URL>"
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, parts.fragment))
    except ValueError:
        return "<unparseable redis url>"


ALONE_WAIT_MS = 10
"""The ``WAIT`` of a durable write while no replica was online at the last one: a replica that came back (it
resynchronised) answers within it; a primary alone refuses each durable write after it."""


class Durability:
    """How many replicas must acknowledge a durable write before it counts (``WAIT numreplicas timeout``).

    Redis 7.0 has no ``WAITAOF`` (7.2): a write is made durable on the primary by ``appendfsync always`` and on the
    replicas by ``WAIT``. A durable write is sent as one pipeline on one connection: the write, then ``WAIT``
    (:meth:`execute`); it counts only when ``replicas`` acknowledged it, however many are online. A primary alone
    (its replica dead, restarting or resynchronising) counts nothing: its writes are refused
    (:class:`NotReplicatedError`: 503, sent again) until a replica is online and acknowledges them. A write counted
    on a primary alone can be lost in the next failover, since the replica the sentinels promote may be one that
    never had it: the old primary started again with its own append-only file is a primary of its own for seconds
    (until the sentinels turn it into a replica, which replaces its data) and a candidate of a failover meanwhile, as
    is a replica whose link just dropped (chaos seed 4: lines answered 200 while the restarted old primary came back
    were gone; ``tests/redis/test_stale_primary_promoted.py``). Invariant: a write that counted is on the primary
    and on ``replicas`` replicas, so any single node's loss or promotion keeps it.

    What is cached: the number of replicas online at the last durable write, which only chooses how the next one
    waits (``WAIT`` for that many, at least one, with ``timeout_ms``; :data:`ALONE_WAIT_MS` while none was online, so
    a primary alone refuses fast).
    What is never cached: whether a write counts. When ``WAIT`` answers that every wanted replica acknowledged it,
    it counts, and nothing more is asked; when it answers fewer (or the last write found replicas missing) ``INFO
    replication`` is read after the ``WAIT``, on the same connection: in the same pipeline when the cache already
    says a replica is missing, else right after it (one more round trip, only then).

    Through Sentinel (:func:`connect_sentinel`) a write that finds no replica online also checks the node against
    the primary the sentinels name (asked then, on the connection still held): a primary a failover left behind
    (frozen or cut off while its replica was promoted, or killed and started again) is refused with
    :class:`StalePrimaryError` and its connections dropped, so the next write goes to the named primary.

    Args:
        replicas: acknowledgements wanted (0: never wait, a lone Redis or one without replicas).
        timeout_ms: how long one ``WAIT`` may take; fewer acknowledgements by then than replicas online is
            :class:`NotReplicatedError`.
    """

    def __init__(self, replicas: int = 0, *, timeout_ms: int = 1000) -> None:
        if replicas < 0 or timeout_ms < 1:
            raise ValueError(f"need replicas >= 0 and timeout_ms >= 1, got {replicas}, {timeout_ms}")
        self.replicas = replicas
        self.timeout_ms = timeout_ms
        self._online = replicas  # until Redis says otherwise: wait for them, with the full timeout

    def __repr__(self) -> str:
        return f"Durability(replicas={self.replicas}, timeout_ms={self.timeout_ms})"

    @property
    def active(self) -> bool:
        """True when writes wait for replicas at all."""
        return self.replicas > 0

    async def execute(self, pipe: Pipeline, name: str, *, raise_on_error: bool = True) -> list[Any]:
        """Send the write queued on ``pipe`` (a pipeline of a client made by :func:`connect` or
        :func:`connect_sentinel`, ``transaction=False``), followed by ``WAIT`` (and ``INFO replication`` when
        needed, class docstring) on the same connection; the write's replies, once it counts.

        Args:
            pipe: the pipeline, holding the write's commands only.
            name: the write, for errors (``ledger.record_intent``).
            raise_on_error: as ``Pipeline.execute``'s: raise a command's error, or return it among the replies.

        Raises:
            NotReplicatedError: fewer replicas than ``replicas`` acknowledged it: the write is on the primary only;
                or, the last write having found no replica online, ``INFO replication`` read first on the
                connection still lists none: the write was not sent at all.
            StalePrimaryError: through Sentinel, no replica online and the node is not the primary the sentinels
                name.
            redis.exceptions.RedisError: a command, ``WAIT`` or ``INFO`` failed (``WAIT`` and ``INFO`` always raise).
        """
        count = len(pipe)
        alone = self._online == 0
        waited_ms = self.timeout_ms if self._online > 0 else ALONE_WAIT_MS
        pipe.wait(min(self.replicas, max(self._online, 1)), waited_ms)  # short when fewer are online
        asked = self._online < self.replicas
        if asked:
            pipe.info("replication")
        if isinstance(pipe, _DurablePipeline):
            pipe.durable = _DurableWrite(self, name, asked, alone)
        replies = await pipe.execute(raise_on_error=raise_on_error)
        acks = replies[count]
        info = replies[count + 1] if len(replies) > count + 1 else None
        del replies[count:]
        self._settle(name, acks, info, waited_ms)
        return replies

    def _settle(self, name: str, acks: Any, info: Any, waited_ms: int) -> None:
        """Count the write ``name``: ``acks`` is ``WAIT``'s reply, ``info`` ``INFO replication``'s (None: not asked,
        as ``WAIT`` answered every wanted replica), ``waited_ms`` the ``WAIT``'s timeout.

        It counts only when ``replicas`` acknowledged it, however many are online: never on a primary alone."""
        for reply in (acks, info):
            if isinstance(reply, Exception):
                raise reply
        if info is None:
            self._online = int(acks)  # at least the replicas wanted: the next write waits for them again
            return
        self._online = online_replicas(info)
        if int(acks) < self.replicas:
            raise NotReplicatedError(name, int(acks), self.replicas, waited_ms)


def online_replicas(info: Any) -> int:
    """How many replicas ``INFO replication``'s parsed reply (a dict) lists online."""
    return sum(
        1 for k, v in dict(info).items() if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"
    )


def durability_of(client: Redis) -> Durability | None:
    """The :class:`Durability` ``client`` was made with (None: a client not made here; nothing waited for)."""
    found = getattr(client, "durability", None)
    return found if isinstance(found, Durability) else None


@dataclass(frozen=True)
class _DurableWrite:
    """What :meth:`Durability.execute` tells the pipeline it sends: whose write, whether ``INFO replication`` is
    queued already, and whether the last durable write found no replica online (``alone``: asked first)."""

    durability: Durability
    name: str
    asked: bool
    alone: bool = False


class _DurablePipeline(Pipeline):
    """A pipeline of the clients made here. A durable write's (:meth:`Durability.execute` marks it) whose ``WAIT``
    answers fewer acknowledgements than wanted, and whose ``INFO replication`` was not queued, reads it right after,
    on the connection still held (the node the write went to); when that reply lists no replica online,
    :meth:`_alone` checks the node.

    While the last durable write found no replica online, a durable write reads ``INFO replication`` first on the
    connection it holds and is not sent while that lists none (:class:`NotReplicatedError`, nothing applied): a
    primary alone would refuse it anyway, and what a refused write applied stays there (a line the agent sends
    again every second would be in the stream once per try)."""

    durable: _DurableWrite | None = None

    async def _execute_pipeline(self, connection: Any, commands: Any, raise_on_error: bool) -> Any:
        write = self.durable
        if write is not None and write.alone:
            await connection.send_command("INFO", "replication")
            info = await self.parse_response(connection, "INFO")
            if isinstance(info, dict) and online_replicas(info) == 0:
                await self._alone(connection, write, 0)
                raise NotReplicatedError(write.name, 0, write.durability.replicas, 0, sent=False)
        response = await super()._execute_pipeline(connection, commands, raise_on_error)
        if write is None:
            return response
        if not write.asked:
            acks = response[-1]
            if not isinstance(acks, int) or acks >= write.durability.replicas:
                return response
            await connection.send_command("INFO", "replication")
            response.append(await self.parse_response(connection, "INFO"))
        info = response[-1]
        if isinstance(info, dict) and online_replicas(info) == 0:
            await self._alone(connection, write, response[-2])
        return response

    async def _alone(self, connection: Any, write: _DurableWrite, acks: Any) -> None:
        """The write went to a primary with no replica online (one Redis URL: nothing to check)."""


class _DurableRedis(aioredis.Redis):
    """A client that carries its :class:`Durability` (set by :func:`connect`)."""

    durability: Durability

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        return _DurablePipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)


class _SentinelPipeline(_DurablePipeline):
    """A pipeline of a Sentinel client: a durable write that found no replica online is checked while its connection
    is still held: the node it went to must be the primary the sentinels name now, else the connection (and every
    idle one) is dropped and :class:`StalePrimaryError` raised (never retried: the write is not repeated anywhere)."""

    async def _alone(self, connection: Any, write: _DurableWrite, acks: Any) -> None:
        node = (str(connection.host), int(connection.port))
        try:
            found = await self.connection_pool.get_master_address()  # type: ignore[attr-defined]
            named = (str(found[0]), int(found[1]))
        except RedisConnectionError:  # no sentinel answered, or none names a primary: not confirmed
            named = None
        if named != node:
            await connection.disconnect()
            await self.connection_pool.disconnect(inuse_connections=False)  # the idle ones may be there too
            raise StalePrimaryError(
                write.name,
                acks if isinstance(acks, int) else 0,
                write.durability.replicas,
                node=f"{node[0]}:{node[1]}",
                named="" if named is None else f"{named[0]}:{named[1]}",
            )


class _SentinelRedis(_DurableRedis):
    """A client of the primary Sentinel names; closing it closes its connections to the sentinels too."""

    sentinels: Sentinel | None = None

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        return _SentinelPipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        if self.sentinels is not None:
            await self.sentinels.aclose()


_PACKED_TYPES = (str, bytes, int)


class _HiredisPacking:
    """A connection that packs a command in C (``hiredis.pack_command``) instead of redis-py's loop in Python (a few
    microseconds a command, several a batch: the replicas' hot path is a few scripts per request). The same bytes as
    redis-py's :meth:`pack_command` (the command's name split at spaces, UTF-8 strings, integers in decimal);
    any other argument (a float, a bool, a memoryview) or encoding takes redis-py's own packing."""

    def pack_command(self, *args: Any) -> list[bytes]:
        first = args[0]
        if (isinstance(first, str) and " " in first) or (isinstance(first, bytes) and b" " in first):
            args = (*first.split(), *args[1:])  # 'CONFIG GET', 'SCRIPT LOAD': sent as separate arguments
        encoder = self.encoder  # type: ignore[attr-defined]
        if (
            encoder.encoding != "utf-8"
            or encoder.encoding_errors != "strict"
            or any(type(arg) not in _PACKED_TYPES for arg in args)
        ):
            return super().pack_command(*args)  # type: ignore[misc,no-any-return]
        return [hiredis.pack_command(args)]

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        """redis-py's, without a task per command: it sends under ``asyncio.wait_for`` (a task and two more turns
        of the event loop in Python 3.11) also when the socket takes the bytes at once, as it does unless its buffer
        is full; then only the wait for the buffer to drain is timed. The same errors as redis-py's."""
        if not self.socket_timeout or not self.is_connected or not isinstance(command, list):  # type: ignore[attr-defined]
            return await super().send_packed_command(command, check_health)  # type: ignore[misc,no-any-return]
        if check_health:
            await self.check_health()  # type: ignore[attr-defined]
        writer = self._writer  # type: ignore[attr-defined]
        try:
            writer.writelines(command)
            if writer.transport.get_write_buffer_size():  # not all taken by the socket: wait for it, bounded
                await asyncio.wait_for(writer.drain(), self.socket_timeout)  # type: ignore[attr-defined]
            else:
                await writer.drain()  # returns at once (or raises: the connection was lost)
        except TimeoutError:
            await self.disconnect(nowait=True)  # type: ignore[attr-defined]
            raise RedisTimeoutError("Timeout writing to socket") from None
        except OSError as exc:
            await self.disconnect(nowait=True)  # type: ignore[attr-defined]
            number, text = ("UNKNOWN", exc.args[0]) if len(exc.args) == 1 else (exc.args[0], exc.args[1])
            raise RedisConnectionError(f"Error {number} while writing to socket. {text}.") from exc
        except BaseException:
            await self.disconnect(nowait=True)  # type: ignore[attr-defined]
            raise


def _packing_in_c(connection_class: type[Any]) -> type[Any]:
    """``connection_class`` with :class:`_HiredisPacking` (a pool made from a URL chose it by the URL's scheme)."""
    if issubclass(connection_class, _HiredisPacking):
        return connection_class
    return type(connection_class.__name__, (_HiredisPacking, connection_class), {})


class _SentinelConnection(_HiredisPacking, SentinelManagedConnection):
    """A connection to the primary that asks the sentinels where it is at every connect, also when redis-py
    reconnects to retry a command (``send_packed_command`` -> ``connect_check_health`` -> ``_connect``), which
    otherwise goes back to the connection's last address: after a failover, the old primary. Killed and started
    again it answers there as a primary of its own (for seconds, until the sentinels make it a replica and its data
    is replaced by the promoted one's), so a command in flight at the kill reconnected to it and its connection
    went back to the pool, taking the writes that followed (chaos seed 1: lines answered 200, then gone)."""

    async def _connect(self) -> None:
        self.host, self.port = await self.connection_pool.get_master_address()
        await super()._connect()  # type: ignore[no-untyped-call]


class _SentinelSSLConnection(_SentinelConnection, SSLConnection):
    """:class:`_SentinelConnection` over TLS."""


class _LeanAcquire:
    """A blocking pool that hands out an idle connection without redis-py 8's wait machinery around it (a condition
    lock, a timeout context, a deprecation check of the arguments and two observability records: ~30 % of a command's
    client CPU under cProfile, a replica's hot path being a few commands per request). The connection is checked as
    redis-py's own acquisition checks it (connected, nothing left unread on it: else reconnected); only when no idle
    connection is there (or the pool is in a maintenance window) does the caller wait redis-py's way, for up to the
    pool's ``timeout``."""

    async def get_connection(self, command_name: Any = None, *keys: Any, **options: Any) -> Any:
        idle = self._available_connections  # type: ignore[attr-defined]
        if not idle or self._in_maintenance:  # type: ignore[attr-defined]
            return await super().get_connection()  # type: ignore[misc]
        connection = idle.pop()
        self._in_use_connections.add(connection)  # type: ignore[attr-defined]
        try:
            await self.ensure_connection(connection)  # type: ignore[attr-defined]
        except BaseException:
            await self.release(connection)  # type: ignore[attr-defined]
            raise
        return connection


class _BlockingPool(_LeanAcquire, aioredis.BlockingConnectionPool):
    """:func:`connect`'s pool: waits for a free connection (:class:`_LeanAcquire`)."""


class _SentinelBlockingPool(_LeanAcquire, SentinelConnectionPool, aioredis.BlockingConnectionPool):
    """Sentinel's pool (asks the sentinels for the primary at every new connection; drops the connections to a
    primary that changed or turned read-only) that waits for a free connection like :func:`connect`'s."""


def _retry() -> Retry:
    # A connection left from before a Redis restart (or a failover) fails at its first use: reconnect and send again
    # (a refused or reset connection, or a primary turned replica; never a timeout, whose command may have run).
    return Retry(ExponentialBackoff(cap=1.0, base=0.05), 3, supported_errors=(RedisConnectionError,))


def _pool_options(client_name: str, socket_timeout_s: float, max_connections: int) -> dict[str, Any]:
    """The connection options :func:`connect` and :func:`connect_sentinel` share (see their Args)."""
    return {
        "max_connections": max_connections,
        "timeout": socket_timeout_s,
        "decode_responses": True,
        "client_name": client_name,
        "socket_timeout": socket_timeout_s,
        "socket_connect_timeout": 5.0,
        "health_check_interval": 30,
        "retry": _retry(),
    }


def connect(
    url: str,
    *,
    client_name: str = "streamrelay",
    socket_timeout_s: float = 30.0,
    max_connections: int = 64,
    durability: Durability | None = None,
) -> Redis:
    """A client for ``url`` (``redis://``, ``rediss://`` or ``unix://``), connected lazily at the first command.

    Args:
        url: the Redis URL, which may hold a password (never shown).
        client_name: the connection's name in ``CLIENT LIST``.
        socket_timeout_s: how long one reply may take; keep it above the longest ``block_ms`` of a stream read. Also
            how long a command waits for a free connection.
        max_connections: connections at most (commands wait for a free one). Parsing uses hiredis (C) when it is
            installed, as the project's dependencies have it.
        durability: how many replicas acknowledge a durable write (default: none waited for).

    Raises:
        ConfigError: ``url`` is not a Redis URL (shown redacted).
    """
    try:
        # A blocking pool: hundreds of runs writing their ledgers at once wait for one of the connections rather
        # than fail (redis-py's default pool raises past 100); the partitions' blocking stream reads hold one each.
        pool = _BlockingPool.from_url(url, **_pool_options(client_name, socket_timeout_s, max_connections))
    except ValueError:
        raise ConfigError(f"redis_url is not a Redis URL: {redacted(url)}") from None
    pool.connection_class = _packing_in_c(pool.connection_class)
    client = _DurableRedis.from_pool(pool)  # the client owns the pool: aclose() closes both
    assert isinstance(client, _DurableRedis)
    client.durability = durability or Durability()
    return client


def connect_sentinel(
    sentinels: Sequence[tuple[str, int]],
    master: str,
    *,
    url: str = "",
    client_name: str = "streamrelay",
    socket_timeout_s: float = 30.0,
    max_connections: int = 64,
    durability: Durability | None = None,
) -> Redis:
    """A client of the primary that Redis Sentinel names ``master`` (``redis.asyncio.sentinel``): every new
    connection asks the sentinels where the primary is, so after a failover the connections reconnect to the
    promoted replica (a connection to a primary that turned replica fails with ``READONLY`` and is dropped).

    Args:
        sentinels: the sentinels' ``(host, port)``; asked in turn (no password).
        master: the name the sentinels monitor the primary under (``sentinel monitor <master> ...``).
        url: credentials, database and TLS of the data nodes, without a host (``redis://:password@/0``,
            ``rediss://user:password@/2``); "" for none.
        client_name: as :func:`connect`'s.
        socket_timeout_s: as :func:`connect`'s (the sentinels are asked with at most 5 s).
        max_connections: as :func:`connect`'s.
        durability: how many replicas acknowledge a durable write (default: none waited for).

    Raises:
        ConfigError: no sentinel, no ``master``, or ``url`` is not a Redis URL (shown redacted).
    """
    if not sentinels or not master:
        raise ConfigError("Redis Sentinel needs at least one sentinel (host, port) and the master's name")
    try:
        options = sentinel_url_options(url)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    manager = Sentinel(  # type: ignore[no-untyped-call]
        list(sentinels), sentinel_kwargs={"socket_timeout": min(5.0, socket_timeout_s), "socket_connect_timeout": 2.0}
    )
    tls = bool(options.pop("ssl", False))  # the connection class says it, not an option
    client = manager.master_for(
        master,
        redis_class=_SentinelRedis,
        connection_pool_class=_SentinelBlockingPool,
        connection_class=_SentinelSSLConnection if tls else _SentinelConnection,
        **_pool_options(client_name, socket_timeout_s, max_connections),
        **options,
    )
    assert isinstance(client, _SentinelRedis)
    client.sentinels = manager
    client.durability = durability or Durability()
    return client


def sentinel_url_options(url: str) -> dict[str, Any]:
    """The connection options a Sentinel deployment's ``redis_url`` gives its data nodes (``redis://:password@/0``,
    ``rediss://user:password@/2``): ``db``, ``username``, ``password`` and ``ssl`` (``rediss``), as far as given;
    ``{}`` for "". The one reading of that URL: the settings check it with this, :func:`connect_sentinel` uses it.

    Raises:
        ValueError: not a ``redis://`` or ``rediss://`` URL, or it names a host, a port or options after ``?`` (the
            sentinels name the primary; options would be ignored). The message shows the URL redacted only.
    """
    if not url:
        return {}
    shown = redacted(url)
    try:
        parts = urlsplit(url)
        port = parts.port
        db = parts.path.strip("/")
        options: dict[str, Any] = {"db": int(db) if db else 0}
    except ValueError:
        raise ValueError(
            f"redis_url is not a Redis URL (with redis_sentinels: redis://:password@/0): {shown}"
        ) from None
    if parts.scheme not in ("redis", "rediss"):
        raise ValueError(f"redis_url is not a Redis URL (with redis_sentinels: redis://:password@/0): {shown}")
    if parts.hostname or port is not None:
        raise ValueError(
            "with redis_sentinels, redis_url gives only credentials and database (redis://:password@/0): "
            "the sentinels name the primary; leave its host out, and its port"
        )
    if parts.query or parts.fragment:
        raise ValueError(
            "with redis_sentinels, redis_url gives only credentials and database (redis://:password@/0): "
            "options after '?' are not read; leave them out"
        )
    if parts.username:
        options["username"] = unquote(parts.username)
    if parts.password:
        options["password"] = unquote(parts.password)
    if parts.scheme == "rediss":
        options["ssl"] = True
    return options


@dataclass(frozen=True)
class Persistence:
    """What a Redis keeps across its own restart (``CONFIG GET appendonly appendfsync save``).

    Attributes:
        appendonly: the append-only file is on: every write is logged before it is answered (``appendfsync``).
        appendfsync: ``always``, ``everysec`` or ``no`` ("" when it could not be read).
        save: the RDB snapshot schedule ("" none; ``"?"`` when it could not be read).
    """

    appendonly: bool
    appendfsync: str
    save: str

    @property
    def volatile(self) -> bool:
        """True without an append-only file: a restart loses the writes since the last snapshot (all of them with
        no snapshot), the fencing tokens go back and the runs answered 200 meanwhile are gone."""
        return not self.appendonly or self.appendfsync == "no"

    def describe(self) -> str:
        """What it keeps, in words (for the refusal and the start-up log)."""
        if self.appendonly and self.appendfsync == "no":
            return (
                "append-only file on but never fsynced (appendfsync no): the operating system writes it when it likes "
                "(~30 s), so a machine crash loses what was answered meanwhile"
            )
        if self.appendonly:
            return f"append-only file on (appendfsync {self.appendfsync or '?'})"
        if self.save and self.save != "?":
            return (
                f"no append-only file (appendonly no), RDB snapshots only (save '{self.save}'): a restart goes back "
                "to the last snapshot"
            )
        return "no persistence (appendonly no, save ''): a restart comes back empty"


async def persistence(client: Redis) -> Persistence:
    """What ``client``'s Redis (the primary) keeps across a restart: ``CONFIG GET`` (the three in one pipeline), or
    ``INFO persistence`` where ``CONFIG`` is refused (managed services rename it).

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    found: dict[str, Any] = {}
    try:
        async with client.pipeline(transaction=False) as pipe:  # one round trip (CONFIG GET of several: Redis 7+)
            for name in ("appendonly", "appendfsync", "save"):
                pipe.config_get(name)
            for reply in await pipe.execute():
                found.update(reply)
    except ResponseError:
        info = await client.info("persistence")
        return Persistence(appendonly=str(info.get("aof_enabled", "0")) == "1", appendfsync="", save="?")
    return Persistence(
        appendonly=str(found.get("appendonly", "no")) == "yes",
        appendfsync=str(found.get("appendfsync", "")),
        save=str(found.get("save", "")),
    )


@contextlib.contextmanager
def unavailable(what: str) -> Iterator[None]:
    """Inside: a refused, reset or timed-out connection to Redis (also a primary being failed over) raises
    :class:`core.errors.StoreUnavailableError` naming ``what``: the caller stops where it is and resumes when Redis
    answers, as for a write. The one place the backend turns redis-py's connection errors into it (the journal's
    and the ledger's reads, :meth:`Script.fenced`'s writes, the shared rate budgets). A read of the journal or the
    ledger must not fail as a bug: a line whose admission read failed would be refused and its input-stream entry
    acknowledged, i.e. lost.

    Raises:
        core.errors.StoreUnavailableError: the connection failed or timed out.
    """
    try:
        yield
    except (RedisConnectionError, RedisTimeoutError) as exc:
        raise StoreUnavailableError(f"Redis did not answer {what} ({type(exc).__name__})") from None


class Script:
    """One Lua script registered on a client (EVALSHA, loaded again after a server restart).

    Args:
        client: the client it runs on.
        source: the Lua text.
        name: for errors.
    """

    def __init__(self, client: Redis, source: str, name: str, *, durable: bool = False) -> None:
        self._client = client
        self._script = client.register_script(source)
        self.name = name
        self.durable = durable
        """Its writes must survive a failover: the client's :class:`Durability` is waited for after each call."""

    def __repr__(self) -> str:
        return f"Script({self.name!r})"

    async def __call__(self, keys: Sequence[str], args: Sequence[str | int | float]) -> Any:
        """Run the script; its reply as Redis gives it (``str``, ``int``, lists, ``None``).

        A ``durable`` script is followed by ``WAIT`` in the same round trip (a pipeline) when the client wants
        acknowledgements; its reply is given once enough replicas have the write.

        Raises:
            NotReplicatedError: durable, and fewer replicas than needed acknowledged the write in time (it is on the
                primary: the caller treats it as not done, and what it wrote must be harmless if it stays).
            redis.exceptions.RedisError: the server or the connection failed.
        """
        durability = durability_of(self._client) if self.durable else None
        if durability is None or not durability.active:
            return await self._script(keys=list(keys), args=list(args))
        async with self._client.pipeline(transaction=False) as pipe:
            await self._script(keys=list(keys), args=list(args), client=pipe)
            (reply,) = await durability.execute(pipe, self.name, raise_on_error=False)
        if isinstance(reply, Exception):  # as a lone EVALSHA raises it (its text unannotated: FENCED, LOST)
            raise reply
        return reply

    def queue(self, pipe: Pipeline, keys: Sequence[str], args: Sequence[str | int | float]) -> None:
        """Queue the script on ``pipe`` by its SHA (EVALSHA), without the ``SCRIPT EXISTS`` round trip redis-py adds to
        a pipeline holding a registered script; a reply ``NoScriptError`` (a Redis restarted since) means it did not
        run: :meth:`load`, then send it again."""
        pipe.evalsha(self._script.sha, len(keys), *keys, *args)

    async def load(self) -> None:
        """Load the script into Redis (after a ``NoScriptError``).

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        await self._client.script_load(self._script.script)

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
            with unavailable(self.name):
                return await self(keys, ["" if token is None else str(token), *args])
        except ResponseError as exc:
            message = str(exc)
            if not message.startswith("FENCED"):
                raise
            current = message.removeprefix("FENCED").strip()
            raise FencedError(partition, token, int(current) if current.isdigit() else None) from None
