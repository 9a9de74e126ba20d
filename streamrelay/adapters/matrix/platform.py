"""Matrix's registration (:data:`PLATFORM`): the event size limit (a chunk length in UTF-16 units of source and a
rendered limit in bytes of the edit's JSON, :data:`DEFAULT_CHUNK`, :data:`RENDERED_MAX`) and the homeserver's rate
limit with their sources, the matrix-nio adapter (imported when the first channel is built), the token variable and
the dry-run mock. Imports no SDK."""

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
RENDERED_MAX = EVENT_BYTES - ENVELOPE_BYTES
"""The most bytes the JSON of a message's edit content may take (63,488): what the adapter's ``measure`` counts and
each message is checked against. An edit carries the text in its fallback ``body``, in ``m.new_content``'s ``body``
and, for Markdown that is more than one paragraph, in its ``formatted_body`` (HTML)."""
BYTES_PER_UNIT = 12
"""The most bytes one UTF-16 unit of source takes in an edit, with a margin: a character of a 3-byte script (CJK)
is 3 bytes in each of the two ``body`` copies and the ``formatted_body``, 9, plus the HTML's tags (measured: 6.0
bytes a character of plain CJK text, 8.5 of CJK Markdown lists with bold, 10.1 of ``"`` escaped as ``\\"`` twice and
``&quot;`` once)."""
DEFAULT_CHUNK = 5_000
"""A channel's default ``limit``: UTF-16 units of source per message, RENDERED_MAX // BYTES_PER_UNIT = 5,290 rounded
down, so that the rendering of a chunk fits in any script and a live preview keeps growing until the chunker rolls
over (about 20,000 characters of Latin Markdown would fit, but one number must hold for every script)."""
MAX_CHUNK = RENDERED_MAX // 2
"""The largest ``limit`` a channel may set (31,744 UTF-16 units): every unit takes at least a byte in each of the
edit's two ``body`` copies, so a longer chunk can never fit. A limit past DEFAULT_CHUNK suits text known to be Latin;
text whose rendering is bigger is then fitted by its bytes (a live preview shows the longest start that fits)."""


def chat(index: int) -> str:
    """A room id (``!opaque:server``, https://spec.matrix.org/latest/appendices/#room-ids), one per ``index``."""
    return f"!chaos{index:05d}:mock.local"


SPEC = PlatformSpec(
    # Two numbers: the chunk length (a channel's `limit`, UTF-16 units of the source text the chunker cuts) and the
    # rendered limit (RENDERED_MAX bytes of the edit's JSON, which the adapter's measure counts).
    max_units=MAX_CHUNK,
    default_limit=DEFAULT_CHUNK,
    unit=LengthUnit.UTF16,
    limit_source=SIZE_LIMITS,
    rendered_max=RENDERED_MAX,
    rendered_unit=f"each message is also checked on its rendering: at most {RENDERED_MAX} bytes of its edit's JSON",
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
        campaign_mock_limits=False,  # the exempted bot: the mock answers no 429 of its own (faults script them)
    ),
)
"""Matrix (matrix-nio against the Client-Server API)."""
