"""Matrix's registration (:data:`PLATFORM`): the event size limit and the homeserver's rate limit with their
sources, the matrix-nio adapter (imported when the first channel is built), the token variable and the dry-run mock.
Imports no SDK."""

from __future__ import annotations

from streamrelay.adapters.platform import DryRunFacts, Platform, PlatformSpec, sdk_adapter, sourced_budget
from streamrelay.core.budgets.rate import BudgetScope
from streamrelay.core.ports import CallKind
from streamrelay.core.units import LengthUnit

SIZE_LIMITS = "https://spec.matrix.org/latest/client-server-api/#size-limits"
RC_MESSAGE = "https://element-hq.github.io/synapse/latest/usage/configuration/config_documentation.html#rc_message"
EVENT_BYTES = 65_536
"""The complete event, federation format in Canonical JSON with signatures, at most 65,536 bytes."""
ENVELOPE_BYTES = 2_048
"""Room kept for what the homeserver adds around the content (room id, sender, ids of auth and previous events,
hashes, signatures: some hundreds of bytes)."""


def chat(index: int) -> str:
    """A room id (``!opaque:server``, https://spec.matrix.org/latest/appendices/#room-ids), one per ``index``."""
    return f"!chaos{index:05d}:mock.local"


SPEC = PlatformSpec(
    # Bytes of the JSON of a message's edit content (an edit carries the text about twice: m.new_content and the
    # fallback body), within 65,536 bytes of event less the envelope.
    max_units=EVENT_BYTES - ENVELOPE_BYTES,
    default_limit=EVENT_BYTES - ENVELOPE_BYTES,
    unit=LengthUnit.UTF16,
    limit_source=SIZE_LIMITS,
    # A typing notice shows for its `timeout` (30 s sent) or until `typing: false`: renewed every 20 s.
    typing_every_s=20.0,
    typing_source="https://spec.matrix.org/latest/client-server-api/#typing-notifications",
    budgets=dict(
        [
            # rc_message: Synapse's default is 0.2 events per second per user with a burst of 10 (sends, edits and
            # redactions are all events); a homeserver's operator may set other numbers or exempt the bot
            # (admin API override_ratelimit): set them in the channel's TOML.
            sourced_budget(
                "rc_message",
                BudgetScope.BOT,
                0.2,
                10,
                RC_MESSAGE,
                frozenset({CallKind.SEND, CallKind.EDIT, CallKind.DELETE}),
            ),
        ]
    ),
)

PLATFORM = Platform(
    name="matrix",
    spec=SPEC,
    build=sdk_adapter("streamrelay.adapters.matrix.adapter", "MatrixAdapter"),
    sdk_module="streamrelay.adapters.matrix.adapter",
    token_env="MATRIX_ACCESS_TOKEN",
    dry_run=DryRunFacts(
        mock="streamrelay.mocks.matrix:MockMatrix",
        default_port=8084,
        token="syt_c3RyZWFtcmVsYXk_DryRunTokenForTheMock_0a1b2c",
        private="!dryrundm:mock.local",
        group="!dryrungroup:mock.local",
        api_path="",
        create_method="send",
        edit_method="send",  # an edit is an m.room.message event too (m.replace)
        chat=chat,
        # A campaign's mock homeserver enforces no rc_message (a bot its operator exempted: Synapse admin API
        # override_ratelimit); 20 events a second keeps the sidecar paced without making runs wait minutes.
        campaign_rates={"rc_message": {"per_s": "20.0", "burst": "10"}},
    ),
)
"""Matrix (matrix-nio against the Client-Server API)."""
