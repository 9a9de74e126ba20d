"""What one platform registers: its delivery facts, its adapter (built lazily), its token and how to dry-run it.

A platform is one folder, ``adapters/<name>/``, whose ``platform`` module defines ``PLATFORM`` (a :class:`Platform`)
without importing the platform's SDK, and one line in :mod:`adapters.registry`. Everything that used to list the
platforms (the settings' ``platform`` key, the service's adapter builder, the SDK loader, the dry runs and the mock
command) iterates the registry.

Nothing here names a platform: the facts are in each platform's own module, each with its documentation URL.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import SecretStr

from streamrelay.core.budgets.rate import MESSAGE_CALLS, Budget, BudgetScope
from streamrelay.core.ports import NO_MARKUP, CallKind, ChannelAdapter, MarkupPermissions
from streamrelay.core.units import LengthUnit


@dataclass(frozen=True)
class SourcedBudget:
    """A default :class:`~core.budgets.rate.Budget` and the documentation URL its numbers come from."""

    budget: Budget
    source: str


def sourced_budget(
    name: str, scope: BudgetScope, per_s: float, burst: float, source: str, calls: frozenset[CallKind] | None = None
) -> tuple[str, SourcedBudget]:
    """One default budget as ``(name, SourcedBudget)``: ``per_s`` calls a second, ``burst`` calls at once, for
    ``calls`` (default: the message calls, :data:`core.budgets.rate.MESSAGE_CALLS`); ``source`` is its documentation
    URL."""
    return name, SourcedBudget(Budget(name, scope, per_s, burst, calls or MESSAGE_CALLS), source)


@dataclass(frozen=True)
class PlatformSpec:
    """One platform's delivery facts.

    Attributes:
        max_units: the most a channel's ``limit`` may be: the chunk length, the source text the chunker cuts one
            message's text at, in ``unit``.
        default_limit: the limit used when a channel sets none (Slack recommends about 4,000 characters).
        unit: how length is counted; UTF-16 units are safe where the platform counts code points.
        limit_source: documentation URL of the limit.
        rendered_max: the most one message may measure once rendered, in the unit of the adapter's ``measure``
            (Matrix: bytes of the edit's JSON), which the adapter is built with and each message is checked
            against; None: the channel's ``limit`` (the platform counts what the chunker counts).
        rendered_unit: what ``rendered_max`` counts, in words (for messages; empty when it is None).
        budgets: default rate budgets by name.
        native: the platform streams by itself (``delivery = "native"``): Telegram sendMessageDraft, Slack
            chat.startStream.
        typing_every_s: how often a typing indicator is shown again while a run shows nothing new (an
            indicator lasts a few seconds: it must be renewed), None when the platform has none.
        typing_source: documentation URL of the indicator's lifetime.
        live_text: the platform is the sidecar's own live page, whose watchers see each message's text.
        edits: the platform can edit a sent message; False (WhatsApp): a channel's ``preview`` and ``progress``
            delivery become ``block`` replies (:meth:`config.settings.ChannelSettings.effective_delivery`) and a Stop
            button is refused.
        edits_source: documentation URL saying the platform cannot edit (when ``edits`` is False).
    """

    max_units: int
    default_limit: int
    unit: LengthUnit
    limit_source: str
    budgets: dict[str, SourcedBudget] = field(default_factory=dict)
    native: bool = False
    typing_every_s: float | None = None
    typing_source: str = ""
    live_text: bool = False
    edits: bool = True
    edits_source: str = ""
    rendered_max: int | None = None
    rendered_unit: str = ""


class AdapterFactory(Protocol):
    """Builds a channel's adapter from ``(token, api_base or None, send_timeout_s, max_units)`` and the mentions and
    links its agents' text may keep (``markup``, default none); imports the SDK when called, never before.
    ``max_units`` is the most one message may measure once rendered (:attr:`core.policy.ChannelPolicy.rendered_max`,
    in the unit of the adapter's ``measure``)."""

    def __call__(
        self,
        token: SecretStr,
        base_url: str | None,
        send_timeout_s: float,
        max_units: int,
        /,
        *,
        markup: MarkupPermissions = ...,
    ) -> ChannelAdapter: ...


def sdk_adapter(module: str, cls: str) -> AdapterFactory:
    """An :data:`AdapterFactory` of ``module.cls``, an adapter class taking ``(token, *, base_url, send_timeout_s,
    max_units, markup)``: the module, and with it the SDK, is imported at the first adapter built."""

    def build(
        token: SecretStr,
        base_url: str | None,
        send_timeout_s: float,
        max_units: int,
        /,
        *,
        markup: MarkupPermissions = NO_MARKUP,
    ) -> ChannelAdapter:
        adapter: ChannelAdapter = getattr(importlib.import_module(module), cls)(
            token.get_secret_value(),
            base_url=base_url,
            send_timeout_s=send_timeout_s,
            max_units=max_units,
            markup=markup,
        )
        return adapter

    return build


@dataclass(frozen=True)
class DryRunFacts:
    """How to dry-run a platform against its mock server in ``mocks/`` (the composition root imports it).

    Attributes:
        mock: the mock server's class as ``"module:Class"`` (e.g. ``"streamrelay.mocks.telegram:MockTelegram"``);
            the module also has ``serve_forever(host, port, rate_limits)``. A name, not an import: adapters never
            import mocks.
        default_port: the port ``streamrelay mock NAME`` listens on by default.
        token: a bot token shaped like the platform's (mocks check the shape; never a real secret).
        private: a one-to-one conversation (Telegram private chat, Slack DM, Discord channel).
        group: a group conversation (Telegram group, Slack channel, Discord guild channel).
        thread_id: a thread for native streaming where the platform needs one (Slack: a parent ts), whose parent
            message (the person's question) the dry run seeds in the mock first.
        api_path: where the SDK is pointed on the mock's host and port (Telegram: the root; Slack ``/api/``; Discord
            ``/api/v10``): a mock in another process is ``http://HOST:PORT`` + this.
        create_method: the platform method that creates a message, by its wire name (faults and latency scripted
            through the mock's control API name it).
        edit_method: the platform method that edits a message.
        chat: the ``index``-th of many conversations (a chaos campaign gives each run its own), its id as the
            platform spells it.
        media_methods: the method that sends each ``media_kind`` (``image``, ``file``, ``audio``, ``video``) where
            it is not ``create_method`` (Telegram: sendPhoto, sendDocument, sendAudio, sendVideo,
            https://core.telegram.org/bots/api#sendphoto); Slack's chat.postMessage with blocks and Discord's
            createMessage with an embed are the create method, so they have none.
        campaign: the channel settings a chaos campaign (``streamrelay chaos``) gives this platform where they differ
            from its defaults (``format = "markdown"``, ``throttle_ms = 1000``), as TOML values by key (Telegram
            ``{"format": '"plain"'}``: its Markdown becomes entities, so the chat's text would lack the markup).
        campaign_rates: rate budgets a campaign's channel overrides, by budget name, as ``[rate.NAME]`` keys and TOML
            values (Matrix: the mock homeserver enforces no ``rc_message``, as for a bot its operator exempted).
        campaign_mock_limits: a campaign starts this platform's mock with its documented rate limits on (False:
            ``--no-rate-limits``, the mock of a bot its operator exempted, whose pace ``campaign_rates`` sets).
        unsettleable: the platform cannot tell whether an uncertain send arrived (WhatsApp: no idempotency key, no
            message history): a create that died with the process, or met a 5xx or a reset, is sent again by the
            core and reported uncertain ("a duplicate is possible"); a campaign allows such a reported double, as
            for Telegram with a shared bot token. WhatsApp no longer is: its uncertain sends are settled by their
            status webhooks (:mod:`adapters.whatsapp.settle`) where the webhook is served.
        native_chat: where a chaos campaign's ``native`` run of ``index`` streams (a conversation the platform
            streams in: a Telegram private chat, a Slack direct message whose thread the campaign seeds, a Teams
            personal chat); None: the platform has no native streaming.
        native_methods: the platform methods a native stream calls, by wire name (start, update, finish where they
            differ): faults and in-flight holds of a campaign's ``native`` runs are scripted on them.
        status_webhook: the sidecar's path where the platform posts status webhooks that settle uncertain sends
            (WhatsApp ``/v1/platforms/whatsapp/webhook``), with the environment variable holding the secret they are
            signed with: a campaign points its mock there (``POST /_mock/webhook``; with replicas, the first one's)
            and gives the sidecar a secret.
            None: the platform has none.
    """

    mock: str
    default_port: int
    token: str
    private: int | str
    group: int | str
    api_path: str
    create_method: str
    edit_method: str
    chat: Callable[[int], int | str]
    thread_id: str | None = None
    media_methods: dict[str, str] = field(default_factory=dict)
    campaign: dict[str, str] = field(default_factory=dict)
    campaign_rates: dict[str, dict[str, str]] = field(default_factory=dict)
    campaign_mock_limits: bool = True
    unsettleable: bool = False
    status_webhook: tuple[str, str] | None = None
    native_chat: Callable[[int], int | str] | None = None
    native_methods: tuple[str, ...] = ()

    def media_method(self, media_kind: str) -> str:
        """The method a media item of ``media_kind`` is sent with (faults scripted on media sends name it)."""
        return self.media_methods.get(media_kind, self.create_method)


def no_bot_id(token: str) -> str | None:
    """A platform whose token holds no bot id: None (replicas then key the bot's shared budgets by channel)."""
    return None


@dataclass(frozen=True)
class Platform:
    """One platform's registration (``adapters/<name>/platform.py`` defines it as ``PLATFORM``).

    Attributes:
        name: the ``platform`` value of a ``[channels.NAME]`` table.
        spec: the delivery facts (limits, rate budgets, native streaming, typing), each with its source.
        build: builds the adapter (imports the SDK when called: a process never loads an SDK it has no channel for).
        sdk_module: the module whose import loads the SDK (``serve`` imports it in a worker thread before building
            channels: :mod:`app.platform_loading`); None when the adapter needs no SDK.
        token_env: the environment variable the shipped channels file names for the bot token (``token_env``);
            None: the platform takes no token (the web channel).
        bot_id: the bot's id read from its token (never the token itself; e.g. Telegram's digits before ``:``),
            keying the budgets replicas share; None when the token holds none.
        dry_run: how to dry-run it against its mock; None: it has no mock (the web channel is the sidecar itself).
    """

    name: str
    spec: PlatformSpec
    build: AdapterFactory
    sdk_module: str | None = None
    token_env: str | None = None
    bot_id: Callable[[str], str | None] = no_bot_id
    dry_run: DryRunFacts | None = None

    @property
    def needs_token(self) -> bool:
        """A channel on this platform needs a bot token from the environment."""
        return self.token_env is not None
