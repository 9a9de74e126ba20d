"""The platforms streamrelay speaks, in one place: a new platform is one folder (``adapters/<name>/platform.py``
defining ``PLATFORM``, see :class:`adapters.platform.Platform`) and one line here.

Importing this imports no SDK: each platform's module names its adapter, imported when a channel is built.
"""

from __future__ import annotations

from streamrelay.adapters.discord.platform import PLATFORM as DISCORD
from streamrelay.adapters.matrix.platform import PLATFORM as MATRIX
from streamrelay.adapters.platform import Platform
from streamrelay.adapters.slack.platform import PLATFORM as SLACK
from streamrelay.adapters.teams.platform import PLATFORM as TEAMS
from streamrelay.adapters.telegram.platform import PLATFORM as TELEGRAM
from streamrelay.adapters.web.platform import PLATFORM as WEB
from streamrelay.adapters.whatsapp.platform import PLATFORM as WHATSAPP

REGISTRY: dict[str, Platform] = {
    platform.name: platform for platform in (TELEGRAM, SLACK, DISCORD, MATRIX, WHATSAPP, TEAMS, WEB)
}
"""Every platform by name, in the order error messages and help texts list them."""


def platform(name: str) -> Platform:
    """The registered platform ``name``.

    Raises:
        KeyError: no platform of that name is registered (settings refuse such a channel first).
    """
    return REGISTRY[name]
