"""The running version, from the installed distribution's metadata (``pyproject.toml``'s ``version``)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version

DISTRIBUTION = "streamrelay"


def version() -> str:
    """The version of the installed ``streamrelay`` distribution (``uv sync`` installs the checkout as one), or
    ``0+unknown`` when it is not installed (run from a bare copy of the source)."""
    try:
        return _distribution_version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"
