"""The environment's side of the settings: ``STREAMRELAY_`` variables, ``__`` between levels."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from streamrelay.core.errors import ConfigError

ENV_PREFIX = "STREAMRELAY_"
ENV_DELIMITER = "__"


def check_env_channels(path: Path) -> None:
    """Refuse an environment override of a channel that exists nowhere: neither the channels file ``path`` nor the
    environment gives it a ``platform``, so it could only fail later, and obscurely, as
    "channels.NAME.platform: Field required". A file that cannot be read is left to the loader to report.

    Raises:
        ConfigError: naming the variable, the channel and the file.
    """
    try:
        table: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    in_file = {str(name).lower() for name in table.get("channels", {})}
    prefix = ENV_PREFIX + "CHANNELS" + ENV_DELIMITER
    by_channel: dict[str, list[str]] = {}
    for variable in os.environ:
        if variable.upper().startswith(prefix):
            name, _, key = variable[len(prefix) :].partition(ENV_DELIMITER)
            if key:
                by_channel.setdefault(name.lower(), []).append(variable)
    for name, variables in sorted(by_channel.items()):
        has_platform = any(v.upper().endswith(ENV_DELIMITER + "PLATFORM") for v in variables)
        if name not in in_file and not has_platform:
            raise ConfigError(
                f"{sorted(variables)[0]} overrides channel {name!r}, which {path} does not have: check the name "
                f"(channels there: {', '.join(sorted(in_file)) or 'none'}), or add [channels.{name}] with its platform"
            )
