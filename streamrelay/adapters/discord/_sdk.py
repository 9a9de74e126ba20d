"""discord.py, imported once with its one known warning silenced (every module of this package takes it from here).

discord.py 2.7 imports the standard library's ``audioop`` for voice, which warns with a ``DeprecationWarning`` on
Python 3.11-3.12 (removed in 3.13, where discord.py uses ``audioop-lts``). Voice is never used here, so that one
warning is silenced while discord.py is first imported; every other warning stays (tests run with warnings as
errors).
"""

import warnings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="'audioop' is deprecated", category=DeprecationWarning)
    import discord

__all__ = ["discord"]
