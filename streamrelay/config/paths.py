"""Where the files of ``[service]`` are: relative paths resolved against the channels file, never the current
directory (a sidecar started from another folder must find the same journal and ledger)."""

from __future__ import annotations

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


def resolve_ledger(ledger: str, config: Path) -> str:
    """The journal and ledger file: a relative ``ledger`` (whether the file or ``STREAMRELAY_SERVICE__LEDGER`` set
    it) is relative to the folder of the channels file ``config``; ``":memory:"`` stays as it is."""
    if ledger == ":memory:" or Path(ledger).is_absolute():
        return ledger
    return str(config.resolve().parent / ledger)


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
