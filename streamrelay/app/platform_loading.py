"""Which chat platform SDKs a process needs, and importing them: only for enabled channels, never at start.

aiogram alone takes about 4 s to import on a small machine (its ~300 pydantic models are built at import; importing
``aiogram.client.bot`` or ``aiogram.methods`` alone loads ``aiogram.types`` whole, so no narrower import is cheaper),
slack_sdk about 0.25 s, discord.py about 0.7 s. Each registered platform names the module that loads its SDK
(:attr:`adapters.platform.Platform.sdk_module`, imported by its adapter factory when a channel on it is built), so a
process with only the web channel (or none) never loads an SDK; ``serve`` listens first and imports them in a worker
thread while ``/healthz`` answers (:mod:`app.serving`).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Collection

from streamrelay.adapters.registry import REGISTRY
from streamrelay.config.settings import Settings

SDK_MODULES: dict[str, str] = {
    name: platform.sdk_module for name, platform in REGISTRY.items() if platform.sdk_module is not None
}
"""Each chat platform's SDK-loading module by platform name (the web channel has none)."""


def unloaded_channels(settings: Settings) -> list[str]:
    """The configured channels whose platform's SDK module is not imported yet, by name."""
    return [
        name
        for name, channel in settings.channels.items()
        if channel.platform in SDK_MODULES and SDK_MODULES[channel.platform] not in sys.modules
    ]


def load_platforms(platforms: Collection[str]) -> None:
    """Import the adapter modules, and so the SDKs, of ``platforms`` (blocking: seconds for aiogram).

    ``serve`` runs it in a worker thread; the event loop goes on answering meanwhile (the import holds the GIL
    most of the time, and hands it over every ``sys.getswitchinterval()``, 5 ms).
    """
    for platform in sorted(platforms):
        if platform in SDK_MODULES:
            importlib.import_module(SDK_MODULES[platform])
