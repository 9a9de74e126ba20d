"""``streamrelay chaos``: a seeded chaos campaign against the real sidecar and mock platforms (:mod:`app.chaos`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from streamrelay.adapters.registry import REGISTRY
from streamrelay.app.cli_run import err, run_async

if TYPE_CHECKING:
    from streamrelay.app.chaos.plan import Options

console = Console()
_PLATFORMS_HELP = " | ".join([*(name for name, p in REGISTRY.items() if p.dry_run is not None), "all"])
"""Every registered platform with a mock (:mod:`adapters.registry`), then ``all``."""


def chaos(
    runs: Annotated[int, typer.Option(min=1, metavar="N", help="how many runs")] = 100,
    seed: Annotated[int, typer.Option(metavar="N", help="the plan's seed (same runs and seed: same plan)")] = 1,
    platform: Annotated[str, typer.Option(metavar="PLATFORM", help=_PLATFORMS_HELP)] = "all",
    mode: Annotated[
        str,
        typer.Option(
            metavar="MODE",
            help="delivery mode of the runs: preview | block | native (the platforms that stream natively only) | all, "
            "or several joined by commas (preview,block)",
        ),
    ] = "all",
    exclusive_bot: Annotated[
        bool,
        typer.Option(
            "--exclusive-bot/--shared-bot",
            help="Telegram's bot token is the sidecar's alone (uncertain sends settled by an id probe) or shared",
        ),
    ] = True,
    concurrency: Annotated[int, typer.Option(min=1, metavar="N", help="agents streaming at once")] = 12,
    long: Annotated[bool, typer.Option("--long", help="outages of minutes (run idle timeout 300 s)")] = False,
    idle_timeout_s: Annotated[
        float | None,
        typer.Option(metavar="SECONDS", help="the sidecar's run_idle_timeout_s (default 20, or 300 with --long)"),
    ] = None,
    kill_every: Annotated[
        int, typer.Option(min=1, metavar="N", help="one planned kill -9 per this many runs (at least 2)")
    ] = 12,
    agent_back_s: Annotated[
        float,
        typer.Option(
            min=0.0,
            metavar="SECONDS",
            help="after a kill, an agent comes back this long after the sidecar answers (above the idle timeout: "
            "its resumed run is closed first)",
        ),
    ] = 0.0,
    fault_every: Annotated[
        int, typer.Option(min=1, metavar="N", help="one planned platform fault per this many runs")
    ] = 4,
    out: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="transcript folder, new or empty (default: a new temporary folder)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
    backend: Annotated[
        str,
        typer.Option(
            metavar="BACKEND", help="sqlite (one sidecar) | redis (replicas on a redis-server the campaign starts)"
        ),
    ] = "sqlite",
    replicas: Annotated[int, typer.Option(min=1, metavar="N", help="replica processes (--backend redis)")] = 1,
    lease_ttl_s: Annotated[
        float,
        typer.Option(
            min=1.0, metavar="SECONDS", help="the replicas' lease_ttl_s (--backend redis; short: kills cost seconds)"
        ),
    ] = 3.0,
    failovers: Annotated[
        int,
        typer.Option(
            min=0,
            metavar="N",
            help="primary failovers (--backend redis): kill -9 of the Redis primary N times; its replica is promoted"
            " by three sentinels",
        ),
    ] = 0,
    approval_ttl_s: Annotated[
        float,
        typer.Option(
            min=1.0,
            metavar="SECONDS",
            help="ttl_s of the approvals the approver decides (an agent gone after asking holds its run this long)",
        ),
    ] = 120.0,  # app.chaos.approvals.DECIDED_TTL_S (not imported here: the command's import stays light)
    fresh_processes: Annotated[
        bool,
        typer.Option(
            "--fresh-processes",
            help="start the sidecar and each restart as a new interpreter (default: forked from a process that has "
            "imported the command and the SDKs: the same code from its arguments on, seconds of CPU less per start)",
        ),
    ] = False,
) -> None:
    """A seeded chaos campaign against the real sidecar and mock platforms (separate processes): kill -9 of the
    sidecar at random points, restarts on the same journal and ledger, agents re-sending from seq 0 or never
    coming back, platform faults (429 storms, 5xx and timeouts before and after commit, resets, outages). With
    --backend redis --replicas N: N replicas on a redis-server of the campaign's own, kills of random replicas;
    --failovers N: that Redis is a primary, a replica and three sentinels, and its primary is killed N times.
    Prints one row per platform and mode; exits 1 when a run was lost, lied about, left unfinished or doubled
    where that is not allowed."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from streamrelay.app.chaos import (
        BACKENDS,
        MODES,
        PLATFORMS,
        Options,
        failed,
        run_campaign,
        summary,
        table,
        write_transcripts,
    )

    def choice(value: str, known: tuple[str, ...], name: str) -> tuple[str, ...]:
        if value == "all":
            return known
        asked = tuple(dict.fromkeys(v.strip() for v in value.split(",")))  # one, or several joined by commas
        for one in asked:
            if one not in known:
                raise typer.BadParameter(f"{one!r} is not one of {', '.join(known)}, all", param_hint=name)
        return asked

    platforms, modes = _native_only(platform, choice(platform, PLATFORMS, "--platform"), choice(mode, MODES, "--mode"))
    if backend not in BACKENDS:
        raise typer.BadParameter(f"{backend!r} is not one of {', '.join(BACKENDS)}", param_hint="--backend")
    options = Options(
        runs=runs,
        seed=seed,
        platforms=platforms,
        modes=modes,
        exclusive_bot=exclusive_bot,
        concurrency=concurrency,
        long=long,
        out=out,
        idle_timeout_s=idle_timeout_s,
        runs_per_kill=kill_every,
        runs_per_fault=fault_every,
        backend=backend,
        replicas=replicas,
        lease_ttl_s=lease_ttl_s,
        failovers=failovers,
        agent_back_s=agent_back_s,
        fresh_processes=fresh_processes,
        approval_ttl_s=approval_ttl_s,
    )
    _chaos_preflight(options)
    shown = err if as_json else console
    progress = Progress(
        TextColumn("[bold]chaos[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[line]}"),
        TimeElapsedColumn(),
        console=shown,
    )
    task = progress.add_task("runs", total=runs, line="starting the mocks and the sidecar…")

    def on_progress(event: str, counts: dict[str, int]) -> None:
        line = f"streaming {counts['streaming']} · kills {counts['kills']} · faults {counts['faults']}"
        progress.update(task, completed=counts["done"], line=line)

    with progress:
        outcome = run_async(run_campaign(options, on_progress))
    result = summary(outcome)
    write_transcripts(outcome, result)
    if as_json:
        typer.echo(json.dumps(result, indent=1, ensure_ascii=False))  # plain: rich would wrap long lines
    else:
        wide = console if console.width >= 130 else Console(width=130)
        wide.print(table(outcome))
        for bad in result["bad_runs"][:20]:
            wide.print(
                f"[red]{escape(bad['run'])}[/] ({bad['platform']}/{bad['mode']}): {escape('; '.join(bad['problems']))}"
            )
            if bad["anomalies"]:
                wide.print(f"  agent: {escape('; '.join(bad['anomalies'])[:400])}")
        if len(result["bad_runs"]) > 20:
            wide.print(f"… and {len(result['bad_runs']) - 20} more bad run(s): summary.json lists them all")
        if outcome.crashes:
            wide.print(f"[red]the sidecar crashed:[/] {escape('; '.join(outcome.crashes))}")
        kept = "transcripts and logs" if options.replicated else "transcripts, logs and the ledger"
        wide.print(f"{kept} in {outcome.out}")
    raise typer.Exit(1 if failed(outcome) else 0)


def _native_only(
    asked: str, platforms: tuple[str, ...], modes: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``--mode native`` runs on the platforms that stream natively only (:data:`app.chaos.plan.NATIVE_PLATFORMS`).

    Raises:
        typer.BadParameter: none of ``platforms`` streams natively.
    """
    from streamrelay.app.chaos.plan import NATIVE_PLATFORMS

    if modes != ("native",):
        return platforms, modes
    native = tuple(p for p in platforms if p in NATIVE_PLATFORMS)
    if not native:
        raise typer.BadParameter(
            f"{asked} has no native streaming: native runs on {', '.join(NATIVE_PLATFORMS)}", param_hint="--mode"
        )
    return native, modes


def _chaos_preflight(options: Options) -> None:
    """Refuse what a campaign cannot run before anything starts: replicas without Redis, Redis without its
    server."""
    from streamrelay.app.chaos.procs import redis_server

    if options.out is not None and options.out.is_dir() and any(options.out.iterdir()):
        raise typer.BadParameter(
            f"{options.out} is not empty: a campaign's journal, ledger and transcripts start from nothing (the runs"
            " of another campaign with the same seed would be taken as already ended); pick a new folder",
            param_hint="--out",
        )
    if not options.replicated:
        if options.replicas != 1:
            raise typer.BadParameter("replicas need --backend redis (sqlite runs one sidecar)", param_hint="--replicas")
        if options.failovers:
            raise typer.BadParameter("failovers need --backend redis (a Redis to fail over)", param_hint="--failovers")
        return
    try:
        redis_server()
    except RuntimeError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from None
