"""The web channel's registration (:data:`PLATFORM`): the sidecar's own live run page as a channel. No SDK, no
token, no rate budgets (nothing leaves the process), no mock (the sidecar is the platform)."""

from __future__ import annotations

from pydantic import SecretStr

from streamrelay.adapters.platform import Platform, PlatformSpec
from streamrelay.core.ports import NO_MARKUP, ChannelAdapter, MarkupPermissions
from streamrelay.core.units import LengthUnit


def build(
    token: SecretStr,
    base_url: str | None,
    send_timeout_s: float,
    max_units: int,
    /,
    *,
    markup: MarkupPermissions = NO_MARKUP,
) -> ChannelAdapter:
    """A :class:`adapters.web.WebAdapter` keeping each part under ``max_units`` UTF-16 units (token, base URL and
    timeout do not apply: the page is in the process; nor does ``markup``: the page has no mentions, and links only
    to http(s) and mailto)."""
    from streamrelay.adapters.web.adapter import WebAdapter

    return WebAdapter(max_units=max_units)


SPEC = PlatformSpec(
    # No platform limit; one part is kept under 65,536 UTF-16 units so that one SSE event stays small. No rate
    # limits (nothing leaves the process), no typing indicator.
    max_units=65_536,
    default_limit=65_536,
    unit=LengthUnit.UTF16,
    limit_source="https://html.spec.whatwg.org/multipage/server-sent-events.html",
    live_text=True,
)

PLATFORM = Platform(name="web", spec=SPEC, build=build)
"""The web channel (``platform = "web"``)."""
