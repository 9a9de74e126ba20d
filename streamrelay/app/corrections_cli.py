"""``streamrelay runs correct|retract|corrections``: an operator corrects or withdraws an ended run's answer.

::

    streamrelay runs correct RUN --id fix-1 --text "The right answer."   each message edited once
    streamrelay runs correct RUN --id fix-1 --file answer.md             the new final from a file (- : stdin)
    streamrelay runs retract RUN --id retract-1 [--reason "It was wrong."]  each message deleted once
    streamrelay runs corrections RUN                                     what each correction changed, per message

Each talks to the running sidecar (``--url`` / ``STREAMRELAY_URL``, the token in ``STREAMRELAY_TOKEN`` or
``--token-env``), which holds the platform connections (``POST /v1/runs/{run}/corrections``: docs/corrections.md). The
same ``--id`` sent again is the same correction, applied once: run the command again after a failure. Failures are
one line on stderr: exit 2 for a bad argument or no token, 1 for what is down, refused or not possible (an unknown
run, a run still running, one retracted, a message that could not be changed yet).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from streamrelay.app.deliveries_cli import _token, call, console, err
from streamrelay.app.ops_cli import DEFAULT_URL, TOKEN_ENV, OpsError

UrlOption = Annotated[str, typer.Option(envvar="STREAMRELAY_URL", metavar="URL", help="the sidecar's base URL")]
TokenEnvOption = Annotated[str, typer.Option(metavar="VAR", help="environment variable holding the sidecar token")]
RunArg = Annotated[str, typer.Argument(metavar="RUN", help="the ended run's id")]
IdOption = Annotated[
    str,
    typer.Option(
        "--id", metavar="ID", help="the correction's id (1-64 of A-Z a-z 0-9 _.:-); the same id is applied once"
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="print JSON instead of a table")]

STEP_COLORS = {"done": "green", "skipped": "dim", "refused": "yellow", "failed": "red", "uncertain": "yellow"}


def correction_table(record: dict[str, Any]) -> Table:
    """One correction's steps, one row per message changed."""
    table = Table(box=box.SIMPLE_HEAD, title=_title(record), title_justify="left")
    for column in ("step", "op", "message", "state", "what happened"):
        table.add_column(column, overflow="fold")
    for step in record.get("steps", []):
        state = str(step.get("state"))
        table.add_row(
            str(step.get("step")),
            escape(str(step.get("op"))),
            escape(str(step.get("message_id") or "—")),
            f"[{STEP_COLORS.get(state, 'white')}]{escape(state)}[/]",
            escape(str(step.get("outcome") or "")),
        )
    return table


def _title(record: dict[str, Any]) -> str:
    fallback = " · posted as a reply" if record.get("fallback") == "reply" else ""
    before, after = len(record.get("before", [])), len(record.get("after", []))
    return escape(
        f"{record.get('kind')} {record.get('id')} of run {record.get('run')}: {record.get('state')}{fallback} "
        f"({before} messages before, {after} after)"
    )


def _post(run: str, body: dict[str, Any], url: str, token_env: str, as_json: bool) -> None:
    token = _token(token_env)
    try:
        status, data = asyncio.run(call("POST", url, f"/v1/runs/{quote(run, safe='')}/corrections", token, body=body))
    except OpsError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(exc.code) from None
    record = data if status == 200 else data.get("correction")
    if as_json:
        typer.echo(json.dumps(data, indent=1, ensure_ascii=False))
    elif isinstance(record, dict):
        console.print(correction_table(record))
    if status != 200:
        err.print(f"[red]error:[/] {escape(str(data.get('error') or status))}", highlight=False)
        raise typer.Exit(2 if status == 400 else 1)


def correct(
    run: RunArg,
    correction_id: IdOption,
    text: Annotated[str | None, typer.Option(metavar="TEXT", help="the new final")] = None,
    file: Annotated[
        Path | None, typer.Option(metavar="FILE", help="read the new final from FILE (- for stdin)")
    ] = None,
    url: UrlOption = DEFAULT_URL,
    token_env: TokenEnvOption = TOKEN_ENV,
    as_json: JsonOption = False,
) -> None:
    """Correct an ended run's answer: each of its messages edited once to the new text (re-chunked with the
    channel's rules), extra chunks sent after the last, surplus messages deleted; posted as a reply where the
    messages cannot be edited."""
    if (text is None) == (file is None):
        err.print("[red]error:[/] give the new final as exactly one of --text TEXT and --file FILE (- for stdin)")
        raise typer.Exit(2)
    if file is not None:
        try:
            text = sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            err.print(f"[red]error:[/] cannot read {file}: {escape(str(exc))}", highlight=False)
            raise typer.Exit(2) from None
    _post(run, {"kind": "run.correct", "id": correction_id, "text": text}, url, token_env, as_json)


def retract(
    run: RunArg,
    correction_id: IdOption,
    reason: Annotated[str | None, typer.Option(metavar="TEXT", help="why (shown where a message is marked)")] = None,
    url: UrlOption = DEFAULT_URL,
    token_env: TokenEnvOption = TOKEN_ENV,
    as_json: JsonOption = False,
) -> None:
    """Withdraw an ended run's answer: each message deleted once (edited to a "retracted" line where it cannot be
    deleted; a notice replying to it where it cannot be edited either)."""
    body: dict[str, Any] = {"kind": "run.retract", "id": correction_id}
    if reason:
        body["reason"] = reason
    _post(run, body, url, token_env, as_json)


def corrections(
    run: RunArg, url: UrlOption = DEFAULT_URL, token_env: TokenEnvOption = TOKEN_ENV, as_json: JsonOption = False
) -> None:
    """A run's corrections and retractions, oldest first: what each changed, per message."""
    token = _token(token_env)
    try:
        status, data = asyncio.run(call("GET", url, f"/v1/runs/{quote(run, safe='')}/corrections", token))
    except OpsError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(exc.code) from None
    if status != 200:
        err.print(f"[red]error:[/] {escape(str(data.get('error') or status))}", highlight=False)
        raise typer.Exit(1)
    if as_json:
        typer.echo(json.dumps(data, indent=1, ensure_ascii=False))
        return
    found = data.get("corrections", [])
    if not found:
        console.print(f"run {escape(run)} has no corrections", highlight=False)
    for record in found:
        console.print(correction_table(record))


def register(app: typer.Typer) -> None:
    """Add ``correct``, ``retract`` and ``corrections`` to ``streamrelay runs``."""
    app.command("correct")(correct)
    app.command("retract")(retract)
    app.command("corrections")(corrections)
