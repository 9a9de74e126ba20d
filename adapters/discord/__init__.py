"""Discord channel adapter (discord.py, REST only): :class:`DiscordAdapter`.

discord.py 2.7 imports the standard library's ``audioop`` for voice, which warns with a
``DeprecationWarning`` on Python 3.11-3.12 (removed in 3.13, where discord.py uses ``audioop-lts``). Voice is
never used here, so that one warning is silenced while discord.py is first imported; every other warning
stays (tests run with warnings as errors).
"""

import warnings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="'audioop' is deprecated", category=DeprecationWarning)
    import discord  # noqa: F401

from adapters.discord.adapter import DiscordAdapter

__all__ = ["DiscordAdapter"]
