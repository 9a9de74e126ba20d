"""``streamrelay init``: a starter configuration in a folder: ``channels.toml`` and ``.env.example``.

The channels file has ``[service]`` (ingest on loopback, the SQLite file beside it) and one channel per platform
asked for, each with its text limit and its rate budgets written out, every number under a comment with the
platform's documentation link (the registered facts: :mod:`adapters.registry`), so an operator sees where each comes
from before changing it. ``.env.example`` names the variables to set (the ingest token, each bot's token) with no
value: secrets never go into a generated file. Existing files are kept unless ``force`` is given.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from streamrelay.adapters.registry import REGISTRY
from streamrelay.core.budgets.rate import MESSAGE_CALLS, Budget

CHANNELS_FILE = "channels.toml"
ENV_FILE = ".env.example"

_HEAD = """\
# streamrelay: a starter configuration (`streamrelay init`). The full reference, every key commented, is the
# shipped streamrelay/config/channels.toml; docs: getting-started.md. Unknown keys are errors that name the key.
# Tokens never live here: `token_env` names the environment variable holding each one (.env.example lists them).

[service]
host = "127.0.0.1"                 # ingest on loopback only: the bot runs on this machine
port = 8787                        # `streamrelay run` exports http://127.0.0.1:8787 to the bot as STREAMRELAY_URL
token_env = "STREAMRELAY_TOKEN"    # the bearer token the bot sends (`streamrelay run` makes one when unset)
ledger = "streamrelay.sqlite3"     # the SQLite journal and ledger, relative to this file's folder
actions = ""                       # no action catalog (streamrelay/config/actions.toml shows one)
"""


def _number(value: float) -> str:
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def _budget(channel: str, name: str, budget: Budget, source: str) -> list[str]:
    """One ``[channels.X.rate.NAME]`` table, the documentation link above its numbers."""
    lines = [
        "",
        f"[channels.{channel}.rate.{name}]",
        f"# {source}",
        f'source = "{source}"',
        f'scope = "{budget.scope}"',
    ]
    per_min = round(budget.per_s * 60, 6)
    if round(budget.per_s, 3) != budget.per_s and per_min.is_integer():  # 95 a minute, not 1.58333 a second
        lines.append(f"per_min = {_number(per_min)}")
    else:
        lines.append(f"per_s = {_number(budget.per_s)}")
    lines.append(f"burst = {_number(budget.burst)}")
    if budget.calls != MESSAGE_CALLS:
        lines.append(f"calls = {json.dumps(sorted(str(c) for c in budget.calls))}")
    return lines


def channels_toml(platforms: Sequence[str]) -> str:
    """The starter channels file for ``platforms`` (registered platform names; a channel each, named after it).

    Raises:
        ValueError: a platform is not registered (the message lists the registered ones).
    """
    unknown = [p for p in platforms if p not in REGISTRY]
    if unknown:
        raise ValueError(f"unknown platform {unknown[0]!r}: one of {', '.join(REGISTRY)}")
    lines = [_HEAD.rstrip("\n")]
    for name in platforms:
        platform = REGISTRY[name]
        spec = platform.spec
        lines += ["", f"[channels.{name}]", f'platform = "{name}"']
        if platform.token_env is not None:
            lines.append(f'token_env = "{platform.token_env}"')
        if platform.dry_run is not None:
            mock = f"http://127.0.0.1:{platform.dry_run.default_port}"
            lines.append(f'# api_base = "{mock}"   # a dry run against the mock: streamrelay mock {name}')
        lines.append('delivery = "preview"               # preview | block | final | progress | native')
        lines += [f"# Text limit ({spec.unit}): {spec.limit_source}", f"limit = {spec.default_limit}"]
        for budget_name, sourced in spec.budgets.items():
            lines += _budget(name, budget_name, sourced.budget, sourced.source)
    return "\n".join(lines) + "\n"


def env_template(platforms: Sequence[str]) -> str:
    """``.env.example``: the variable names the configuration reads, without values."""
    lines = [
        "# Copy to .env, fill in, keep it out of version control (chmod 600). `set -a; . ./.env; set +a` exports it.",
        "# The bearer token bots send to the sidecar (`streamrelay run` makes one for its bot when this is empty):",
        "STREAMRELAY_TOKEN=",
        "# /metrics from another machine wants this bearer token (unset: loopback clients only):",
        "STREAMRELAY_METRICS_TOKEN=",
    ]
    for name in platforms:
        token_env = REGISTRY[name].token_env
        if token_env is not None:
            lines += [f"# the {name} channel's bot token:", f"{token_env}="]
    lines += [
        "# the example bots' model provider (examples/telegram_bot.py, examples/slack_bot.py):",
        "ANTHROPIC_API_KEY=",
    ]
    return "\n".join(lines) + "\n"


def write_starter(folder: Path, platforms: Sequence[str], *, force: bool = False) -> list[Path]:
    """Write ``channels.toml`` and ``.env.example`` into ``folder`` (created when missing); the paths written.

    Raises:
        FileExistsError: one of them exists and ``force`` is false (nothing is written; the message names it).
        ValueError: an unknown platform.
    """
    files = {folder / CHANNELS_FILE: channels_toml(platforms), folder / ENV_FILE: env_template(platforms)}
    taken = [path for path in files if path.exists()]
    if taken and not force:
        raise FileExistsError(f"{taken[0]} exists: pass --force to overwrite it")
    folder.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        path.write_text(text)
    return list(files)
