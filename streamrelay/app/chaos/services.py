"""The processes of one campaign together: the mocks, the sidecar, and with ``--backend redis`` its replicas on a
redis-server of the campaign's own.

The sidecar (``sqlite``) is one :class:`Sidecar`: killed with SIGKILL and started again at once on the same journal
and ledger. Replicas (``redis``) are N of them on one Redis: a kill hits a live one at random (while another one
answers), which is started again after :data:`RESTART_AFTER_S` (a new process: a new replica id); meanwhile the
others take the lines of every run, and its partitions move to them once its leases lapse (``lease_ttl_s``). The
next kill need not wait for that restart. Agents reach a random live one (:meth:`Services.pick`).

With ``--failovers N`` the Redis is a primary, a replica and three sentinels
(:class:`app.chaos.sentinels.RedisSentinels`) and the replicas find the primary through the sentinels; a ``primary
failover`` fault kills the primary with -9 (:meth:`Services.fail_over`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import secrets
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx

from streamrelay.adapters.redis import Leases, connect, connect_sentinel, conversation_key, partition_of
from streamrelay.adapters.redis.client import Redis
from streamrelay.adapters.registry import REGISTRY
from streamrelay.app.chaos.plan import Options
from streamrelay.app.chaos.procs import (
    HOST,
    PIDS,
    READY_TIMEOUT_S,
    TOKEN_ENV,
    KillRecord,
    Proc,
    RedisServer,
    child_env,
    free_port,
    record_pid,
    write_config,
)
from streamrelay.app.chaos.sentinels import MASTER, FailoverRecord, RedisSentinels
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.preloaded import ZYGOTE, Preloaded

RESTART_AFTER_S = 1.0
"""``redis``: how long a killed replica stays down before a new process takes its place (its port)."""


class Sidecar:
    """One sidecar process of the campaign (the sidecar, or one replica) and whether it answers now.

    Args:
        name: ``sidecar``, or ``replica-N``.
        port: where it listens (a restart listens there again).
        proc: its process.
    """

    def __init__(self, name: str, port: int, proc: Proc) -> None:
        self.name = name
        self.port = port
        self.url = f"http://{HOST}:{port}"
        self.proc = proc
        self.up = asyncio.Event()
        """Set while it answers; cleared from a kill until the restarted one answers."""
        self.generation = 0
        """The campaign's start count when this one last started (a request begun before saw a kill)."""
        self.open: Counter[str] = Counter()
        """Requests open on it, per run (a kill of it interrupts their runs)."""

    def __repr__(self) -> str:
        return f"Sidecar({self.name!r}, {self.url}, up={self.up.is_set()})"

    @contextlib.contextmanager
    def serving(self, run: str) -> Iterator[None]:
        """While a request of ``run`` is open on this one."""
        self.open[run] += 1
        try:
            yield
        finally:
            self.open[run] -= 1
            if self.open[run] <= 0:
                del self.open[run]


class Services:
    """The mocks and the sidecar (or the replicas and their Redis) of one campaign.

    Args:
        options: the campaign's options.
        out: the transcript folder (logs, config, ledger).

    Raises:
        RuntimeError: ``redis``, and no redis-server on PATH.
    """

    def __init__(self, options: Options, out: Path) -> None:
        self.options = options
        self.out = out
        self.token = secrets.token_hex(16)
        self.mock_ports = {p: free_port() for p in options.platforms}
        self.config = out / "config.toml"
        self.ledger = out / "ledger.sqlite3"
        self.mocks: dict[str, Proc] = {}
        failing = options.replicated and options.failovers > 0
        self.redis = RedisServer(out) if options.replicated and not failing else None
        self.sentinels = RedisSentinels(out) if failing else None
        tokens = {TOKEN_ENV[p]: DRY_RUN[p].token for p in options.platforms}
        self.webhook_secret = secrets.token_hex(16)
        """The secret the mocks sign their status webhooks with (:attr:`DryRunFacts.status_webhook`)."""
        hooks = {hook[1]: self.webhook_secret for p in options.platforms if (hook := _status_webhook(p)) is not None}
        env = {"STREAMRELAY_TOKEN": self.token, **tokens, **hooks}
        serve = [sys.executable, "-m", "streamrelay", "serve", "--config", str(self.config)]
        self.sidecars: list[Sidecar] = []
        self.preloaded = None if options.fresh_processes else Preloaded(child_env(env))
        """The zygote the sidecars are forked from (:mod:`app.preloaded`): a restart after a kill then costs no
        imports (about 9 CPU-seconds with the six platforms' SDKs); None with ``--fresh-processes``."""
        if not options.replicated:
            port = free_port()
            proc = Proc("sidecar", serve, child_env(env), out / "sidecar.log", out / PIDS, self.preloaded)
            self.sidecars.append(Sidecar("sidecar", port, proc))
        else:
            if self.redis is not None:
                env["STREAMRELAY_SERVICE__REDIS_URL"] = self.redis.url
            if self.sentinels is not None:
                env["STREAMRELAY_SERVICE__REDIS_SENTINELS"] = json.dumps(self.sentinels.addresses)
                env["STREAMRELAY_SERVICE__REDIS_SENTINEL_MASTER"] = MASTER
            for n in range(1, max(1, options.replicas) + 1):
                port, name = free_port(), f"replica-{n}"
                argv = [*serve, "--port", str(port)]
                proc = Proc(name, argv, child_env(env), out / f"{name}.log", out / PIDS, self.preloaded)
                self.sidecars.append(Sidecar(name, port, proc))
        self.port = self.sidecars[0].port
        self.url = self.sidecars[0].url
        self.up = asyncio.Event()
        """Set while every sidecar answers (a kill waits for it)."""
        self.any_up = asyncio.Event()
        """Set while at least one sidecar answers (an agent waits for it)."""
        self.generation = 0
        """How many times a sidecar was started."""
        self.kills: list[KillRecord] = []
        self.crashes: list[str] = []
        """A sidecar died by itself (not killed by the campaign): a finding."""
        self.conversations: dict[str, str] = {}
        """``redis``: each run's conversation key (its partition tells which replica holds it)."""
        self.t0 = time.monotonic()
        self._down_since: float | None = self.t0
        """When the last sidecar stopped answering (monotonic seconds); None while one answers."""
        self._down_total = 0.0
        self._rng = random.Random(f"chaos-replicas-{options.seed}")
        self._lock = asyncio.Lock()
        self._restarts: set[asyncio.Task[None]] = set()

    @property
    def sidecar(self) -> Proc:
        """The (first) sidecar's process."""
        return self.sidecars[0].proc

    def mock_url(self, platform: str) -> str:
        return f"http://{HOST}:{self.mock_ports[platform]}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def watch_runs(self, runs: Iterable[tuple[str, str, int | str]]) -> None:
        """Know each run's conversation (``run``, ``channel``, ``chat_id``) to tell which replica holds it."""
        self.conversations.update({run: conversation_key(channel, chat) for run, channel, chat in runs})

    async def start(self) -> None:
        """Start every mock (documented rate limits on, unless the platform's campaign facts say its bot is exempted:
        :attr:`adapters.platform.DryRunFacts.campaign_mock_limits`) and the Redis, then the sidecars; wait until all
        answer.

        Raises:
            RuntimeError: a process exited or did not answer within :data:`READY_TIMEOUT_S`.
        """
        if self.preloaded is not None:
            self.preloaded.begin()  # its imports run while the mocks start
            assert self.preloaded.pid is not None
            record_pid(self.out / PIDS, "preloaded", self.preloaded.pid, [sys.executable, "-m", ZYGOTE])
        for platform, port in self.mock_ports.items():
            proc = Proc(
                f"mock {platform}",
                [sys.executable, "-m", "streamrelay", "mock", platform, "--port", str(port), *_limits_flag(platform)],
                child_env({}),
                self.out / f"mock-{platform}.log",
                self.out / PIDS,
            )
            self.mocks[platform] = proc
            proc.start()
        if self.redis is not None:
            await self.redis.start()
        if self.sentinels is not None:
            await self.sentinels.start()
        for platform, proc in self.mocks.items():
            await self._ready(proc, f"{self.mock_url(platform)}/_mock/state")
            await self._point_status_webhook(platform)
        write_config(self.config, self.options, self.port, self.mock_ports, self.ledger)
        await asyncio.gather(*(self._start_sidecar(s) for s in self.sidecars))

    async def _point_status_webhook(self, platform: str) -> None:
        """Point ``platform``'s mock at the sidecar's status webhook, signed with the campaign's secret, where the
        platform has one (WhatsApp). With replicas, as the load balancer in front of them would: each attempt goes to
        the next replica in turn (one that is down is passed over; the mock delivers a failed one again, as Meta
        does), and any of them records them in Redis, where every replica reads them."""
        hook = _status_webhook(platform)
        if hook is None:
            return
        urls = [f"{s.url}{hook[0]}" for s in self.sidecars]
        body = {"url": urls[0], "urls": urls[1:], "app_secret": self.webhook_secret, "retry_for_s": 600}
        async with httpx.AsyncClient(timeout=10.0) as client:
            answer = await client.post(f"{self.mock_url(platform)}/_mock/webhook", json=body)
            answer.raise_for_status()

    async def _ready(self, proc: Proc, url: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if not proc.alive:
                    raise RuntimeError(f"{proc.name} exited with {proc.exit_code} while starting (log: {proc.log})")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(url)).status_code < 500:
                        return
                await asyncio.sleep(0.05)
        raise RuntimeError(f"{proc.name} did not answer within {READY_TIMEOUT_S:g} s (log: {proc.log})")

    async def _start_sidecar(self, sidecar: Sidecar) -> None:
        for attempt in range(3):
            await asyncio.to_thread(sidecar.proc.start)  # the zygote's first serve imports the SDKs: seconds
            try:
                await self._ready(sidecar.proc, f"{sidecar.url}/readyz")  # listening, and the journal resumed
            except RuntimeError as exc:
                self.crashes.append(f"start #{sidecar.proc.starts}: {exc}")
                sidecar.proc.kill()
                if attempt == 2:
                    raise
                await asyncio.sleep(1.0)
                continue
            self.generation += 1
            sidecar.generation = self.generation
            sidecar.up.set()
            self._refresh()
            return

    def _refresh(self) -> None:
        for event, value in ((self.up, all), (self.any_up, any)):
            if value(s.up.is_set() for s in self.sidecars):
                event.set()
            else:
                event.clear()
        now = time.monotonic()
        if self.any_up.is_set() and self._down_since is not None:
            self._down_total += now - self._down_since
            self._down_since = None
        elif not self.any_up.is_set() and self._down_since is None:
            self._down_since = now

    def up_clock(self) -> float:
        """Seconds since the campaign began during which at least one sidecar answered. Patience is counted on
        it: no run can be delivered while no sidecar runs, so a kill's outage and the restart (seconds on a loaded
        machine) never eat a run's time to finish; a run is still judged unfinished when it had its full patience
        of a running sidecar."""
        now = time.monotonic()
        down = self._down_total + (now - self._down_since if self._down_since is not None else 0.0)
        return now - self.t0 - down

    def _down(self, sidecar: Sidecar) -> None:
        sidecar.up.clear()
        self._refresh()

    async def pick(self) -> Sidecar:
        """A live sidecar, at random among the replicas (waits while none answers)."""
        while True:
            await self.any_up.wait()
            live = [s for s in self.sidecars if s.up.is_set()]
            if len(live) == 1:
                return live[0]
            if live:
                return self._rng.choice(live)

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def can_kill(self) -> bool:
        """A kill may hit now: the sidecar answers (``redis``: at least two replicas do, so one is left)."""
        live = sum(s.up.is_set() for s in self.sidecars)
        return live >= 2 or (live == 1 and len(self.sidecars) == 1)

    async def kill_and_restart(self, reason: str, run: str | None, unfinished: list[str]) -> KillRecord | None:
        """Kill -9 the sidecar and start it again on the same journal and ledger (returns once it answers); with
        replicas, kill a live one at random and return at once: a new process takes its place after
        :data:`RESTART_AFTER_S` (:attr:`up` is set again once it answers). None when no kill may hit now (another
        kill or a restart is under way): this one is skipped. ``unfinished``: the live runs (``redis``: narrowed to
        those the victim holds)."""
        if self._lock.locked() or not self.can_kill():
            return None
        async with self._lock:
            if not self.options.replicated:
                victim, replica = self.sidecars[0], None
            else:
                victim = self._rng.choice([s for s in self.sidecars if s.up.is_set()])
                unfinished, replica = await self._held_by(victim, unfinished), victim.name
            at = round(self.elapsed(), 3)
            record = KillRecord(len(self.kills) + 1, reason, run, at, unfinished=unfinished, replica=replica)
            self._down(victim)
            victim.proc.kill()
            self.kills.append(record)
            if not self.options.replicated:
                await self._restart(victim, record)
            else:
                task = asyncio.create_task(self._restart(victim, record), name=f"restart:{victim.name}")
                self._restarts.add(task)
                task.add_done_callback(self._restarts.discard)
            return record

    async def _restart(self, victim: Sidecar, record: KillRecord) -> None:
        t = time.monotonic()
        if self.options.replicated:
            await asyncio.sleep(RESTART_AFTER_S)
        await self._start_sidecar(victim)
        record.down_s = round(time.monotonic() - t, 3)

    async def _held_by(self, victim: Sidecar, runs: list[str]) -> list[str]:
        """The runs among ``runs`` that ``victim`` holds: it owns their partition (asked of Redis: the lease's
        owner id holds its process id), or their agent has a request open on it."""
        pid = str(victim.proc.pid)
        partitions = self.options.partitions
        client = self.redis_client()
        try:
            leases = Leases(client)
            owners: dict[int, str] = {}
            for p in range(partitions):
                holder = await leases.holder(p)
                owners[p] = "" if holder is None else holder.owner
        except Exception:  # Redis is the replicas' to judge: an unknown owner counts every run as held
            owners = {p: f"-{pid}-" for p in range(partitions)}
        finally:
            await client.aclose()

        def held(run: str) -> bool:
            key = self.conversations.get(run)
            owner = owners.get(partition_of(key, partitions), "") if key is not None else ""
            return f"-{pid}-" in owner or run in victim.open

        return sorted(r for r in runs if held(r))

    def redis_client(self) -> Redis:
        """A client of the campaign's Redis primary (through the sentinels with failovers); the caller closes it."""
        if self.sentinels is not None:
            sentinels = [(HOST, port) for port in self.sentinels.sentinel_ports]
            return connect_sentinel(sentinels, MASTER, client_name="streamrelay-chaos", socket_timeout_s=5.0)
        assert self.redis is not None
        return connect(self.redis.url, client_name="streamrelay-chaos", socket_timeout_s=5.0)

    async def fail_over(self) -> FailoverRecord:
        """Kill -9 the Redis primary once its replica is in sync; returns once the sentinels promoted the replica
        (the killed one is started again and rejoins as a replica meanwhile).

        Raises:
            RuntimeError: no replica was in sync, or none was promoted in time.
        """
        assert self.sentinels is not None
        await self.sentinels.replica_in_sync()
        return await self.sentinels.fail_over(round(self.elapsed(), 3))

    async def watch(self) -> None:
        """Restart a sidecar whenever it dies by itself (recorded in :attr:`crashes`); runs until cancelled."""
        redis_gone = False
        while True:
            await asyncio.sleep(0.5)
            if self.redis is not None and not self.redis.proc.alive and not redis_gone:
                redis_gone = True
                self.crashes.append(f"redis-server exited by itself with {self.redis.proc.exit_code}")
            for sidecar in self.sidecars:
                if self._lock.locked() or sidecar.proc.alive or not sidecar.up.is_set():
                    continue
                async with self._lock:
                    who = "the sidecar" if not self.options.replicated else sidecar.name
                    self.crashes.append(
                        f"{who} exited by itself with {sidecar.proc.exit_code} at {self.elapsed():.1f} s"
                    )
                    self._down(sidecar)
                    await self._start_sidecar(sidecar)

    async def script(self, client: httpx.AsyncClient, platform: str, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /_mock/script`` on ``platform``'s mock; its answer (``{"applied"}`` or ``{"error"}``)."""
        answer = await client.post(f"{self.mock_url(platform)}/_mock/script", json=body)
        result: dict[str, Any] = answer.json()
        return result

    async def state(self, client: httpx.AsyncClient, platform: str) -> dict[str, Any]:
        """``GET /_mock/state`` of ``platform``'s mock."""
        answer = await client.get(f"{self.mock_url(platform)}/_mock/state", timeout=120.0)
        answer.raise_for_status()
        result: dict[str, Any] = answer.json()
        return result

    def close(self) -> None:
        """Stop the sidecars (and their restarts under way), every mock and the Redis (SIGTERM, then SIGKILL)."""
        for task in list(self._restarts):
            task.cancel()
        for sidecar in self.sidecars:
            sidecar.up.clear()
        self._refresh()
        for sidecar in self.sidecars:
            sidecar.proc.stop()
        for proc in self.mocks.values():
            proc.stop()
        if self.redis is not None:
            self.redis.stop()
        if self.sentinels is not None:
            self.sentinels.stop()
        if self.preloaded is not None:
            self.preloaded.close()


def _status_webhook(platform: str) -> tuple[str, str] | None:
    """``platform``'s status webhook (path, secret variable), None when it has none."""
    dry = REGISTRY[platform].dry_run
    return None if dry is None else dry.status_webhook


def _limits_flag(platform: str) -> list[str]:
    """``streamrelay mock``'s flag for ``platform``'s campaign mock: none (documented rate limits on), or
    ``--no-rate-limits`` where the registration says the campaign's bot is exempted."""
    dry = REGISTRY[platform].dry_run
    return [] if dry is None or dry.campaign_mock_limits else ["--no-rate-limits"]
