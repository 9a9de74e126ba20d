"""Settings: ``streamrelay/config/channels.toml`` loaded with pydantic-settings, overridden from the environment.

Precedence: values passed in code > environment (``STREAMRELAY_`` prefix, ``__`` between levels, e.g.
``STREAMRELAY_CHANNELS__TELEGRAM__THROTTLE_MS=500``) > the TOML file. Unknown keys are errors that name
the key and the file. Tokens come only from the environment variables that ``token_env`` names.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from streamrelay.config.clients import ClientSettings
from streamrelay.config.connections import ConnectionSettings
from streamrelay.config.environment import ENV_DELIMITER, ENV_PREFIX, check_env_channels
from streamrelay.config.paths import resolve_actions, resolve_ledger
from streamrelay.config.platforms import NATIVE_PLATFORMS, PLATFORMS, TOKEN_PLATFORMS, PlatformName, SourcedBudget
from streamrelay.config.tables import (
    BudgetSettings,
    ChunkSettings,
    CoalesceSettings,
    Strict,
    WindowTemplateSettings,
)
from streamrelay.core.chunking import ChunkParams
from streamrelay.core.delivery.send_chain import MAX_RETRY_AFTER_S
from streamrelay.core.errors import ConfigError
from streamrelay.core.events import APPROVER_ID, DeliveryMode
from streamrelay.core.ingest.clients import CLIENT_NAME_PATTERN, DEFAULT_CLIENT, ClientLimits
from streamrelay.core.policy import ChannelPolicy, ReasoningPolicy, SubagentPolicy
from streamrelay.core.ports import MarkupPermissions, TextFormat
from streamrelay.core.text.coalescer import CoalesceParams

DEFAULT_CONFIG = Path(__file__).with_name("channels.toml")


class ChannelSettings(Strict):
    """One ``[channels.NAME]`` table."""

    platform: PlatformName
    enabled: bool = True
    token_env: str | None = None
    api_base: str | None = None
    delivery: DeliveryMode = DeliveryMode.PREVIEW
    format: Literal["plain", "markdown"] = "markdown"
    limit: int | None = Field(default=None, ge=1)
    throttle_ms: int = Field(default=1000, ge=0)
    send_timeout_ms: int = Field(default=10_000, ge=1)
    settle_window_ms: int = Field(default=30_000, ge=0)
    """WhatsApp: how long an uncertain send waits for its status webhook before the rule of
    :mod:`adapters.whatsapp.settle` decides on silence (docs/platforms.md, WhatsApp). Teams with
    ``settle_with_graph``: how long after the create a settle that finds nothing reads again before it answers not
    sent (adapters/teams/graph.py)."""
    settle_with_graph: bool = False
    """Teams: settle an uncertain send (a timeout, a 5xx, a kill mid-call) by reading the conversation back through
    Microsoft Graph (adapters/teams/graph.py); needs ``graph_tenant`` and a Graph permission the operator grants
    (``ChatMessage.Read.Chat`` or ``Chat.Read.All`` for chats; ``ChannelMessage.Read.Group`` or
    ``ChannelMessage.Read.All`` for channels, with ``graph_team``). Off, or without the permission: such a send is
    reported uncertain ("a duplicate is possible"), docs/platforms.md, Microsoft Teams."""
    graph_tenant: str | None = Field(default=None, pattern=r"^([0-9a-fA-F-]{36}|[A-Za-z0-9-]+\.onmicrosoft\.com)$")
    """Teams with ``settle_with_graph``: the tenant's id (a GUID) or ``NAME.onmicrosoft.com``, which grants the
    app-only Graph token (https://learn.microsoft.com/en-us/entra/identity-platform/v2-oauth2-client-creds-grant-flow)."""
    graph_team: str | None = Field(default=None, pattern=r"^[0-9a-fA-F-]{36}$")
    """Teams with ``settle_with_graph``: the team's id (its Microsoft 365 group id) whose channels the bot posts in
    (https://learn.microsoft.com/en-us/graph/api/channel-list-messages); None: a channel's sends are not settled."""
    media_fetch_private: bool = False
    """Matrix: whether a media URL may name a private, loopback or link-local address. The sidecar fetches a Matrix
    media item's file itself to upload it, so an agent's URL could otherwise make it read its own network (the cloud's
    metadata service at 169.254.169.254) into a room; set it for files on a private network (or the mocks)."""
    max_retry_after_s: float = Field(default=MAX_RETRY_AFTER_S, gt=0, le=86_400)
    """The longest 429 ``retry_after`` obeyed (seconds); a longer wait is the platform refusing for now: the part is
    reported failed with the reason (the desk, to resend later), not waited for, and the rest of the conversation goes
    on (:data:`core.delivery.send_chain.MAX_RETRY_AFTER_S`, the default, says why 120 s)."""
    text_retention_hours: float | None = Field(default=None, gt=0, le=87_600)
    """How long a run's text is kept after the run ended, in hours; then the ledger drops it (each part's shown text,
    desk entries' texts, corrections), keeping the report, message ids and content hashes (docs/retention.md). Not
    set: kept until erased (``streamrelay runs erase``)."""
    subagents: SubagentPolicy = SubagentPolicy.HIDDEN
    reasoning: ReasoningPolicy = ReasoningPolicy.HIDDEN
    typing: bool = True
    reasoning_opened: bool = False
    exclusive_bot: bool = False
    delta_replay_guard: bool = True
    stop_button: bool = False
    """A Stop control on a run's live message (core/run/stop_controls.py); the bot forwards its clicks to the
    sidecar."""
    approvers: list[str] = Field(default_factory=list, max_length=50)
    """Platform user ids (``telegram:user:123``) who may decide an ``approval.request`` naming none
    (core/run/approvals.py)."""
    approvals_anyone: bool = False
    """Anyone in the chat may decide an ``approval.request`` that names nobody (where ``approvers`` is empty too);
    off, such a request is refused."""
    approve_actions: list[str] = Field(default_factory=list, max_length=50)
    """Tool calls a person must approve before they reach the pipeline lane (core/lanes/hold.py): action classes
    (``irreversible``, ``compensable``, ``reversible``, ``idempotent``) and tool names; decided by ``approvers``."""
    approve_ttl_s: float = Field(default=600.0, gt=0, le=7 * 24 * 3600)
    """How long such a call waits for a person (seconds); then it is denied."""
    allow_mentions: bool = False
    """Agent text may notify people: Slack ``<!channel>``, ``<!here>``, ``<@U…>``; Discord ``@everyone``, users,
    roles; Telegram ``tg://user?id=`` links. Off: rendered inert (:class:`core.ports.MarkupPermissions`)."""
    allow_platform_links: bool = False
    """Agent text may use the platform's own link forms: Slack ``<url|label>``, Telegram ``tg://`` links. Off: shown
    as text (Markdown links to http(s) URLs are always links)."""
    chunk: ChunkSettings = Field(default_factory=ChunkSettings)
    coalesce: CoalesceSettings = Field(default_factory=CoalesceSettings)
    rate: dict[str, BudgetSettings] = Field(default_factory=dict)
    window_template: WindowTemplateSettings | None = None
    """WhatsApp: the approved template sent when the 24-hour customer service window is closed (131047)
    (:class:`config.tables.WindowTemplateSettings`, docs/platforms.md, WhatsApp)."""

    @model_validator(mode="after")
    def _platform_rules(self) -> ChannelSettings:
        spec = PLATFORMS.get(self.platform)
        if spec is not None and self.limit is not None and self.limit > spec.max_units:
            rendered = f"; {spec.rendered_unit}" if spec.rendered_unit else ""
            raise ValueError(
                f"limit {self.limit} is over {self.platform}'s {spec.max_units}: limit is the chunk length in"
                f" {spec.unit} units of the source text{rendered} ({spec.limit_source})"
            )
        if self.delivery is DeliveryMode.NATIVE and self.platform not in NATIVE_PLATFORMS:
            raise ValueError(
                f"delivery 'native': {self.platform} has no native streaming; use preview, block, final or progress"
                f" (native exists on {', '.join(NATIVE_PLATFORMS)})"
            )
        if spec is not None:
            for name, table in self.rate.items():
                table.merged(name, spec.budgets.get(name))
        if self.window_template is not None and self.platform != "whatsapp":
            raise ValueError(
                f"window_template: only WhatsApp has a customer service window; remove it from this {self.platform} "
                "channel"
            )
        if self.api_base is not None and not self.api_base.startswith(("http://", "https://")):
            raise ValueError(f"api_base {self.api_base!r} must start with http:// or https://")
        return self

    @model_validator(mode="after")
    def _graph_rules(self) -> ChannelSettings:
        """Graph settlement is Teams'; it needs the tenant that grants the token."""
        graphy = self.settle_with_graph or self.graph_tenant is not None or self.graph_team is not None
        if graphy and self.platform != "teams":
            raise ValueError(
                "settle_with_graph, graph_tenant and graph_team are Microsoft Teams settings (Graph reads a Teams "
                f"conversation back); remove them from this {self.platform} channel"
            )
        if self.settle_with_graph and self.graph_tenant is None:
            raise ValueError(
                "settle_with_graph needs graph_tenant: the tenant's id (a GUID) or NAME.onmicrosoft.com, which grants "
                "the app-only Graph token"
            )
        return self

    @model_validator(mode="after")
    def _approvers_rules(self) -> ChannelSettings:
        """Each approver is a platform user id like the ``by`` a bot forwards (core/run/approvals.py); a channel whose
        ``approve_actions`` hold calls names who may decide them."""
        if self.approve_actions and not self.approvers and not self.approvals_anyone:
            raise ValueError(
                "approve_actions: nobody may decide the calls it holds; list approvers (like 'telegram:user:123') "
                "or set approvals_anyone = true"
            )
        for who in self.approvers:
            if APPROVER_ID.fullmatch(who) is None:
                raise ValueError(
                    f"approvers: {who!r} is not a platform user id like 'telegram:user:123' "
                    "(1-200 letters, digits or :_.@#+-)"
                )
        return self

    @model_validator(mode="after")
    def _stop_button_rules(self) -> ChannelSettings:
        """``stop_button`` needs a live chat message to carry it (core/run/stop_controls.py)."""
        if self.stop_button and self.platform == "web":
            raise ValueError(
                "stop_button: the live page's Stop comes with its link (GET /v1/runs/{run}/watch?stop=1), "
                "not from this setting; leave it false on a web channel"
            )
        spec = PLATFORMS.get(self.platform)
        if self.stop_button and spec is not None and not spec.edits:
            raise ValueError(
                f"stop_button: {self.platform} cannot edit a sent message ({spec.edits_source}), so no button could be "
                "taken off when the run ends; leave it false (or use the live page's Stop)"
            )
        if self.stop_button and self.delivery is DeliveryMode.FINAL:
            raise ValueError(
                "stop_button: delivery 'final' shows nothing before the end, so no message can carry a Stop "
                "button; use preview, block, progress or native (or the live page's Stop)"
            )
        return self

    def effective_delivery(self) -> DeliveryMode:
        """The delivery mode the channel runs with: ``delivery``, except on a platform that cannot edit a sent
        message (:attr:`adapters.platform.PlatformSpec.edits` False: WhatsApp), where ``preview`` and ``progress``
        (which grow one message by edits) become ``block`` replies: the answer arrives in whole blocks, each a new
        message. Accepted rather than refused so one channels file serves every platform; :meth:`delivery_note`
        says so."""
        spec = PLATFORMS[self.platform]
        if not spec.edits and self.delivery in (DeliveryMode.PREVIEW, DeliveryMode.PROGRESS):
            return DeliveryMode.BLOCK
        return self.delivery

    def delivery_note(self) -> str | None:
        """Why :meth:`effective_delivery` differs from ``delivery`` (one line for dry runs and the start log), else
        None."""
        effective = self.effective_delivery()
        if effective is self.delivery:
            return None
        source = PLATFORMS[self.platform].edits_source
        return (
            f"delivery {self.delivery.value!r} becomes {effective.value!r} replies on {self.platform}: it cannot edit "
            f"a sent message ({source})"
        )

    def policy(self, name: str) -> ChannelPolicy:
        """The core's view of this channel (its delivery is :meth:`effective_delivery`)."""
        spec = PLATFORMS[self.platform]
        unit = spec.unit
        max_units = self.limit or spec.default_limit
        return ChannelPolicy(
            name=name,
            delivery=self.effective_delivery(),
            max_units=max_units,
            unit=unit,
            render_limit=spec.rendered_max,
            fmt=TextFormat(self.format),
            throttle_s=self.throttle_ms / 1000,
            block_chunk=ChunkParams(
                min_chars=self.chunk.min_chars,
                max_chars=self.chunk.max_chars,
                break_preference=self.chunk.break_preference,
                unit=unit,
            ),
            coalesce=CoalesceParams(
                min_chars=min(self.coalesce.min_chars, max_units),
                max_chars=min(self.coalesce.max_chars, max_units),
                idle_ms=self.coalesce.idle_ms,
                joiner=self.coalesce.joiner,
                unit=unit,
            ),
            subagents=self.subagents,
            reasoning=self.reasoning,
            typing_every_s=spec.typing_every_s if self.typing else None,
            reasoning_opened=self.reasoning_opened,
            live_text=spec.live_text,
            exclusive_bot=self.exclusive_bot,
            delta_replay_guard=self.delta_replay_guard,
            stop_button=self.stop_button,
            approvers=tuple(self.approvers),
            approvals_anyone=self.approvals_anyone,
            approve_actions=tuple(self.approve_actions),
            approve_ttl_s=self.approve_ttl_s,
            edits=spec.edits,
            max_retry_after_s=self.max_retry_after_s,
            text_retention_s=None if self.text_retention_hours is None else self.text_retention_hours * 3600,
        )

    def markup(self) -> MarkupPermissions:
        """The mentions and links this channel's adapter lets agent text keep (``allow_mentions``,
        ``allow_platform_links``)."""
        return MarkupPermissions(mentions=self.allow_mentions, platform_links=self.allow_platform_links)

    def with_values(self, name: str, **values: Any) -> ChannelSettings:
        """This channel with ``values`` changed, validated like the file (a copy would skip the checks).

        Raises:
            ConfigError: a value is wrong for this channel; the message names the key.
        """
        try:
            return ChannelSettings.model_validate({**self.model_dump(), **values})
        except ValidationError as exc:
            raise ConfigError(f"channels.{name}: " + "; ".join(str(e["msg"]) for e in exc.errors())) from None

    def budgets(self) -> list[SourcedBudget]:
        """The platform's default budgets with this channel's ``[rate.NAME]`` tables applied."""
        defaults = PLATFORMS[self.platform].budgets
        merged = dict(defaults)
        for name, table in self.rate.items():
            merged[name] = table.merged(name, defaults.get(name))
        return list(merged.values())

    def token(self, name: str) -> SecretStr:
        """The channel's token from the environment (the web channel needs none: an empty secret).

        Raises:
            ConfigError: ``token_env`` is not set, or the variable is empty.
        """
        if self.platform not in TOKEN_PLATFORMS:
            return SecretStr("")
        if not self.token_env:
            raise ConfigError(f"channels.{name}.token_env is missing: name the environment variable of the token")
        value = os.environ.get(self.token_env, "")
        if not value:
            raise ConfigError(
                f"channels.{name}: environment variable {self.token_env} is not set; export the bot token there"
            )
        return SecretStr(value)


class ServiceSettings(Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65535)
    token_env: str = "STREAMRELAY_TOKEN"
    ledger: str = "var/streamrelay.sqlite3"
    """The SQLite file of the journal and the ledger (``":memory:"``: none kept). Relative: to the channels file's
    folder, never the current directory (:func:`config.paths.resolve_ledger`). One process at a time holds it."""
    max_body_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    max_line_bytes: int = Field(default=1024 * 1024, ge=256)
    run_idle_timeout_s: float = Field(default=600.0, gt=0)
    """Seconds a run may receive nothing before it is closed with what it has (its agent crashed or never came
    back)."""
    retry_window_s: float = Field(default=600.0, gt=0, allow_inf_nan=False)
    """Seconds a message part's calls that are safe to retry (edits, deletes, settled creates) are retried through a
    platform outage (5xx, timeouts, resets, 429s) before the part is given up and reported; independent of
    ``run_idle_timeout_s`` (a short idle timeout for fast agents does not shorten what an outage may last)."""
    keepalive_s: float = Field(default=15.0, gt=0)
    """Seconds of silence after which an open stream (live page, pipeline lane) gets a keepalive."""
    live_buffer: int = Field(default=1000, ge=1)
    """A run's latest live events kept for watchers that reconnect (past them: one ``reset`` event)."""
    actions: str = "actions.toml"
    """The action catalog (config/actions.toml's format); relative: beside the channels file, else the shipped one
    (:func:`config.paths.resolve_actions`); "" for none (then every tool is treated as irreversible: it waits for
    the run's commit point)."""
    log_format: Literal["json", "console"] | None = None
    """``json`` (one object per line) or ``console``; unset: console on a terminal, JSON otherwise."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    metrics_token_env: str = "STREAMRELAY_METRICS_TOKEN"
    """The environment variable of the bearer token ``/metrics`` wants; while it is unset or empty, ``/metrics``
    answers loopback clients only."""
    ops_host: str = "127.0.0.1"
    """Interface of the ops listener (``/healthz``, ``/readyz``, ``/metrics`` only)."""
    ops_port: int | None = Field(default=None, ge=0, le=65535)
    """Port of the ops listener; unset: none (the probes and metrics are on the ingest listener only)."""
    drain_s: float = Field(default=20.0, ge=0)
    """On SIGTERM or SIGINT, how long active runs may take to finish before the service stops (what is left
    resumes at the next start); a second signal stops at once."""
    otlp_endpoint: str = Field(default="", pattern=r"^(https?://\S+)?$")
    """Where ``serve`` exports its spans over OTLP/HTTP: a collector's base URL (``http://collector:4318``; the spans
    go to ``/v1/traces`` under it). Empty: the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` decides, and without it
    nothing is exported. Needs ``pip install 'streamrelay[otel]'`` (docs/tracing.md)."""
    heap_trim_s: float = Field(default=5.0, ge=0)
    """At most one trim of the C heap (glibc ``malloc_trim``) every this many seconds, and only after runs ended: the
    pages ended runs freed inside the heap go back to the OS (:mod:`adapters.ops.heap`). 0: never; without glibc
    (musl, macOS): nothing is done."""
    audit_sample: float = Field(default=0.0, ge=0, le=1)
    """The share of delivered runs audited in the background (0 to 1; 0: none): each drawn run's messages are read
    back from the platform ``audit_after_s`` after its end, and drift (deleted, edited by someone else) is logged,
    counted (``streamrelay_audit_drift_total``) and shown in the run's report (:mod:`core.run.audit_sampler`,
    docs/audit.md). Only channels that can read messages back (Slack, Discord, Matrix, Teams with Graph)."""
    audit_after_s: float = Field(default=300.0, ge=0, le=7 * 86_400)
    """How long after a sampled run ended it is audited (seconds)."""
    deliveries_retention_days: float = Field(default=30.0, gt=0, le=3650)
    """How long the desk keeps what ended runs did not deliver (``streamrelay deliveries``, ``GET /v1/deliveries``),
    counted from each run's end, open or not: older entries are pruned in the background (:mod:`core.run.desk`). Never
    unbounded: at most 10 years."""
    receipts_retention_hours: float = Field(default=192.0, ge=1, le=8760)
    """How long a platform's status receipt (WhatsApp's status webhooks, which settle an uncertain send) is kept after
    it was last recorded: older ones are pruned every 30 s (SQLite) or expire (Redis). Default 8 days: Meta retries an
    undelivered webhook for up to 7 days (https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks), and a
    restart must still find the receipts of the sends it settles (:data:`core.records.receipts.RECEIPTS_RETENTION_S`).
    At least 1 hour: above the settle window and the 10 minutes that prove the webhooks flow."""
    backend: Literal["sqlite", "redis"] = "sqlite"
    """``sqlite``: one process, the journal and the ledger in the ``ledger`` file. ``redis``: replicas on one Redis
    (``redis_url``), each owning a share of the ``partitions``."""
    redis_url: SecretStr | None = None
    """``redis://[:password@]host:port/db`` (``rediss://`` for TLS); it may hold a password: never logged. Set it
    from the environment: ``STREAMRELAY_SERVICE__REDIS_URL``. With ``redis_sentinels`` it is optional and gives
    only the credentials, database and TLS of the data nodes, without a host (``redis://:password@/0``)."""
    redis_sentinels: list[str] = Field(default_factory=list)
    """Redis Sentinel instead of one URL: the sentinels' ``host:port`` (three or more, on separate machines). Every
    replica asks them for the primary of ``redis_sentinel_master`` and follows a failover to the promoted replica."""
    redis_sentinel_master: str = ""
    """The name the sentinels monitor the primary under (``sentinel monitor <name> ...``); needed with
    ``redis_sentinels``."""
    redis_wait_replicas: int | None = Field(default=None, ge=0, le=16)
    """How many Redis replicas must acknowledge (``WAIT``) the writes that must survive a failover: a lease's fencing
    token, a ledger intent, an accepted line, the epoch markers. A primary with fewer replicas online refuses them
    (503, sent again) until enough are back: a write on a primary alone could be lost to the next failover. Unset:
    1 with ``redis_sentinels``, 0 with ``redis_url``."""
    redis_wait_timeout_ms: int = Field(default=1000, ge=10, le=60_000)
    """How long such a write waits for its acknowledgements before it is refused (503, or the run resumes)."""
    allow_volatile_redis: bool = False
    """``serve`` refuses a Redis (the primary) without an append-only file (``appendonly no``): a restart of it
    loses the runs in flight and the lines answered 200, and sends fencing tokens back (an owner paused past its
    lease could then write again). ``true`` takes such a Redis anyway (tests, throwaway demos)."""
    partitions: int = Field(default=16, ge=1, le=4096)
    """P: conversations are spread over this many partitions, each owned by one replica at a time. Fixed for a
    deployment (changing it moves conversations between partitions: change it only with no run active)."""
    lease_ttl_s: float = Field(default=10.0, ge=1.0, le=300.0)
    """A partition lease's life (renewed every third of it): a dead replica's runs move after at most 4/3 of it."""
    advertise_url: str = ""
    """Where the other replicas reach this one (``http://host:port``); unset: ``http://<host>:<port>``."""
    overload_lag_ms: float = Field(default=100.0, ge=0)
    """Past capacity ingest pushes back before the event loop stalls the sends: while the loop lags more than this
    (milliseconds, a time-weighted mean over about a second) new runs are answered 503 with ``Retry-After``, past
    twice it every line but a run's ``end`` (the request is cut there: ``pushed_back_from`` says where to resume).
    0: never."""
    overload_backlog_events: int = Field(default=2000, ge=0)
    """Past capacity, seen from the runs: while more events than this wait for their runs' workers (all runs together)
    every line but a run's ``end`` is pushed back like past ``overload_lag_ms``, past half of it new runs. 0: never."""
    overload_retry_after_s: float = Field(default=1.0, ge=1.0, le=60.0)
    """The ``Retry-After`` (seconds) of a pushed-back request."""
    connections: ConnectionSettings = Field(default_factory=ConnectionSettings)
    """``[service.connections]``: read timeouts, connection caps and keepalive of the ingest listener."""

    @model_validator(mode="after")
    def _redis_needs_url(self) -> ServiceSettings:
        url = self.redis_url.get_secret_value() if self.redis_url is not None else ""
        if self.redis_sentinels:
            self.sentinel_addresses()  # each is host:port
            if not self.redis_sentinel_master:
                raise ValueError("redis_sentinels needs redis_sentinel_master: the name the sentinels monitor")
            from streamrelay.adapters.redis.client import sentinel_url_options  # redis-py: only for sentinels

            sentinel_url_options(url)  # ValueError: not one that gives only credentials and database
        elif self.backend == "redis" and not url:
            raise ValueError(
                "backend = 'redis' needs redis_url (or redis_sentinels and redis_sentinel_master): set [service] "
                "redis_url or STREAMRELAY_SERVICE__REDIS_URL"
            )
        return self

    def sentinel_addresses(self) -> list[tuple[str, int]]:
        """``redis_sentinels`` as ``(host, port)`` pairs.

        Raises:
            ValueError: an entry is not ``host:port`` with a port in 1..65535.
        """
        found: list[tuple[str, int]] = []
        for entry in self.redis_sentinels:
            host, _, port = entry.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"redis_sentinels: {entry!r} is not host:port")
            found.append((host.strip("[]"), int(port)))
        return found

    def wait_replicas(self) -> int:
        """The replicas a durable write waits for: ``redis_wait_replicas``, else 1 with sentinels and 0 without."""
        if self.redis_wait_replicas is not None:
            return self.redis_wait_replicas
        return 1 if self.redis_sentinels else 0


class Settings(BaseSettings):
    """All settings: ``[service]``, ``[channels.NAME]`` and ``[clients.NAME]`` tables."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter=ENV_DELIMITER, extra="forbid", hide_input_in_errors=True
    )

    service: ServiceSettings = Field(default_factory=ServiceSettings)
    channels: dict[str, ChannelSettings] = Field(default_factory=dict)
    clients: dict[str, ClientSettings] = Field(default_factory=dict)
    """Callers with their own tokens and limits; none: one client, :data:`core.ingest.clients.DEFAULT_CLIENT`, holding
    the
    service token (``[service] token_env``) with the default limits."""

    @model_validator(mode="after")
    def _clients_known(self) -> Settings:
        for name, client in self.clients.items():
            if CLIENT_NAME_PATTERN.fullmatch(name) is None:
                raise ValueError(f"client name {name!r}: use lower-case letters, digits, '_' and '-'")
            unknown = sorted(set(client.channels or ()) - set(self.channels))
            if unknown:
                raise ValueError(f"clients.{name}.channels names unknown channels {unknown}: configure them first")
            if client.approve_actions:  # its held calls are decided by each channel's approvers (core/lanes/hold.py)
                used = client.channels if client.channels is not None else list(self.channels)
                nobody = sorted(
                    c for c in used if not self.channels[c].approvers and not self.channels[c].approvals_anyone
                )
                if nobody:
                    raise ValueError(
                        f"clients.{name}.approve_actions: channels {nobody} name nobody who may decide the calls it "
                        "holds; give them approvers (or approvals_anyone = true), or list only other channels in "
                        f"clients.{name}.channels"
                    )
        return self

    def client_limits(self) -> dict[str, ClientLimits]:
        """Every client's limits by name (the default client alone when none is configured)."""
        if not self.clients:
            return {DEFAULT_CLIENT: ClientLimits()}
        return {name: client.limits(name) for name, client in self.clients.items()}

    def client_tokens(self) -> list[tuple[ClientLimits, SecretStr]]:
        """Every client with its bearer token from the environment.

        Raises:
            ConfigError: a token variable is not set.
        """
        if not self.clients:
            token = os.environ.get(self.service.token_env, "")
            if not token:
                raise ConfigError(
                    f"environment variable {self.service.token_env} is not set: export the bearer token agents "
                    "must send (e.g. `export STREAMRELAY_TOKEN=$(openssl rand -hex 24)`)"
                )
            return [(ClientLimits(), SecretStr(token))]
        return [(client.limits(name), client.token(name)) for name, client in self.clients.items()]


def load_settings(path: str | Path = DEFAULT_CONFIG, *, include_disabled: bool = False, **overrides: Any) -> Settings:
    """Load settings from ``path`` (TOML), the environment and ``overrides``.

    An environment override merges into the TOML's table of the same name, also for a channel the TOML disables
    (``STREAMRELAY_CHANNELS__SLACK__API_BASE`` while Slack has ``enabled = false``). Channels with
    ``enabled = false`` (in the file or the environment) are then left out unless ``include_disabled`` (the demo
    dry-runs them). Relative paths in ``[service]`` are resolved by :mod:`config.paths`.

    Raises:
        ConfigError: the file is missing or not TOML, a key is unknown, a value is wrong, or an environment variable
            overrides a channel the file does not have; the message names the key, the file and the variable.
    """
    toml_path = Path(path)
    if not toml_path.is_file():
        where = "" if toml_path.is_absolute() else f" (in {Path.cwd()})"
        raise ConfigError(f"configuration file {toml_path} not found{where}: pass --config with its path")
    check_env_channels(toml_path)

    try:
        settings = _sourced(toml_path)(**overrides)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, toml_path)) from None
    except ValueError as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise ConfigError(f"{toml_path}: not valid TOML: {exc}") from None
    settings.channels = {name: ch for name, ch in settings.channels.items() if ch.enabled or include_disabled}
    for client in settings.clients.values():  # a client keeps the channels that are on
        if client.channels is not None:
            client.channels = [name for name in client.channels if name in settings.channels]
    settings.service.ledger = resolve_ledger(settings.service.ledger, toml_path)
    settings.service.actions = resolve_actions(settings.service.actions, toml_path)
    try:  # validated again, without the environment
        return _sourced(None).model_validate(settings.model_dump())
    except ValidationError as exc:
        raise ConfigError(_describe(exc, toml_path)) from None


def _sourced(toml_path: Path | None) -> type[Settings]:
    """:class:`Settings` from the values given, the environment, then ``toml_path``; None: from the values given only
    (the environment was read once already: read again, it would bring back the channels left out)."""

    class _Sourced(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            if toml_path is None:
                return (init_settings,)
            return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file=toml_path))

    return _Sourced


def _describe(exc: ValidationError, path: Path) -> str:
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        where = f"{path} or the environment (STREAMRELAY_{key.upper().replace('.', '__')})"
        if err["type"] == "extra_forbidden":
            lines.append(f"unknown key {key!r} in {where}")
        else:
            lines.append(f"{key} in {where}: {err['msg']}")
    return "; ".join(lines)
