"""Where the files of ``[service]`` are: relative paths resolved against the channels file, never the current
directory (a sidecar started from another folder must find the same journal and ledger); the one exception is the
shipped channels file of an installed package, whose relative ledger goes to a per-user state folder
(:func:`state_dir`) rather than into site-packages."""

from __future__ import annotations

import os
from pathlib import Path

from streamrelay.core.errors import ConfigError

SHIPPED = Path(__file__).parent
"""The package's config/ folder (streamrelay/config): the shipped channels.toml and actions.toml."""
PACKAGE = SHIPPED.parent
"""The installed ``streamrelay`` package's folder."""
CHECKOUT = PACKAGE.parent
"""The source checkout's root when the package runs from one (its tests/, docs/ beside streamrelay/)."""


def recordings() -> Path:
    """The recorded provider streams (one folder per format) the demo and the chaos campaign replay: the wheel
    ships the checkout's tests/streams as streamrelay/recordings (pyproject's force-include), so an installed
    package finds them inside itself and a checkout in tests/streams (one copy of each recording in the repo)."""
    shipped = PACKAGE / "recordings"
    return shipped if shipped.is_dir() else CHECKOUT / "tests" / "streams"


INSTALLED_FOLDERS = frozenset({"site-packages", "dist-packages"})
"""Folder names that mean the package is installed (a wheel), not run from a source checkout."""


def installed(folder: Path = SHIPPED) -> bool:
    """True when ``folder`` (by default the shipped config/ folder) lies inside a site-packages or dist-packages
    folder: an installed package, whose own folders are no place for data (shared, read-only, replaced on upgrade)."""
    return any(part in INSTALLED_FOLDERS for part in folder.resolve().parts)


def state_dir() -> Path:
    """The per-user folder for the journal and ledger of the shipped channels file of an installed package:
    ``$XDG_STATE_HOME/streamrelay``, else ``~/.local/state/streamrelay`` (the store creates it on demand)."""
    base = os.environ.get("XDG_STATE_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "state"
    return root / "streamrelay"


def resolve_ledger(ledger: str, config: Path) -> str:
    """The journal and ledger file: a relative ``ledger`` (whether the file or ``STREAMRELAY_SERVICE__LEDGER`` set
    it) is relative to the folder of the channels file ``config``; ``":memory:"`` stays as it is. When ``config`` is
    the shipped channels file of an installed package (:func:`installed`: ``serve`` or ``run`` without
    ``--config`` after ``pip install``), a relative ledger is relative to :func:`state_dir` instead, never inside
    site-packages; in a source checkout it stays beside the shipped file (``streamrelay/config/var/...``)."""
    if ledger == ":memory:" or Path(ledger).is_absolute():
        return ledger
    folder = config.resolve().parent
    if folder == SHIPPED.resolve() and installed(folder):
        return str(state_dir() / ledger)
    return str(folder / ledger)


def resolve_actions(actions: str, config: Path) -> str:
    """The action catalog: a relative ``actions`` is looked for beside the channels file ``config`` first, then
    among the shipped files (config/ in the checkout), so a channels file copied elsewhere keeps the shipped catalog
    until a catalog of its own sits beside it. ``""`` (none) and absolute paths stay as they are.

    Raises:
        ConfigError: the catalog is in neither place (the message names both and what to do).
    """
    if not actions or Path(actions).is_absolute():
        return actions
    beside, shipped = config.resolve().parent / actions, SHIPPED / actions
    if beside.is_file():
        return str(beside)
    if shipped.is_file():
        return str(shipped)
    raise ConfigError(
        f"action catalog {actions!r} ([service] actions in {config}) not found beside it ({beside}) nor in "
        f'{SHIPPED}: copy config/actions.toml there, give an absolute path, or set actions = "" for none'
    )
