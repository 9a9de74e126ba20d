"""What a campaign prints and writes: one row per platform and mode (a table, or JSON), the bad runs in detail, and
the transcript folder (per run: plan, what the agent did, the chat, the report, the calls, the verdict; the
sidecar's and mocks' logs, the config and the ledger)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from rich.table import Table

from streamrelay.app.chaos.campaign import Outcome
from streamrelay.app.chaos.plan import Options, RunPlan

COLUMNS = (
    ("runs", "runs"),
    ("lost", "lost"),
    ("doubled", "doubled"),
    ("uncertain_reported", "uncertain\nreported"),
    ("lying", "lying\nreports"),
    ("unfinished", "unfinished"),
    ("misplaced", "media\nmisplaced"),
    ("media", "media\nshown"),
    ("stops", "stops\n(posted)"),
    ("approvals", "approvals\nasked"),
    ("approved", "approved"),
    ("denied", "denied"),
    ("expired", "expired"),
    ("undecided", "undecided\n(run ended)"),
    ("strangers_refused", "stranger\npresses\nrefused"),
    ("approvals_bad", "approvals\ndoubled /\nlost /\nwrong"),
    ("corrected", "corrected"),
    ("kills", "kills"),
    ("interrupted", "runs\ninterrupted"),
    ("faults", "faults\ninjected"),
)


def row_name(plan: RunPlan, exclusive_bot: bool) -> str:
    if plan.platform == "telegram":
        return f"telegram, {'exclusive' if exclusive_bot else 'shared'} bot"
    return plan.platform


def rows(outcome: Outcome) -> list[dict[str, Any]]:
    """One row per platform and mode, in plan order of platforms then modes, and a total row."""
    exclusive = outcome.options.exclusive_bot
    keyed: dict[tuple[str, str], dict[str, Any]] = {}
    for platform in outcome.options.platforms:
        for mode in outcome.options.modes:
            sample = next((p for p in outcome.plans if p.platform == platform and p.mode == mode), None)
            if sample is None:
                continue
            keyed[(platform, mode)] = (
                {"platform": row_name(sample, exclusive), "mode": mode}
                | {key: 0 for key, _ in COLUMNS}
                | {"doubled_bad": 0}
            )
    by_run = {p.run: p for p in outcome.plans}
    for plan in outcome.plans:
        row = keyed[(plan.platform, plan.mode)]
        verdict = outcome.verdicts[plan.run]
        row["runs"] += 1
        row["lost"] += verdict.lost
        row["doubled"] += verdict.doubled
        row["doubled_bad"] += verdict.doubled and not verdict.doubled_allowed
        row["uncertain_reported"] += verdict.uncertain
        row["lying"] += verdict.lying
        row["unfinished"] += verdict.unfinished
        row["misplaced"] += verdict.misplaced
        row["media"] += verdict.media_shown
        row["stops"] += verdict.stopped
        judged = verdict.approval
        row["approvals"] += judged.asked
        for decided in ("approved", "denied", "expired", "undecided"):
            row[decided] += judged.outcome == decided
        row["strangers_refused"] += judged.stranger_refused
        row["approvals_bad"] += judged.bad
        row["corrected"] += verdict.expected == "corrected"
        row["stops_posted"] = row.get("stops_posted", 0) + (plan.run in outcome.stops)
        row["media_planned"] = row.get("media_planned", 0) + len(plan.media)
        row["faults"] += len(outcome.faulted_calls.get(plan.run, []))
    interrupted: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
    for kill in outcome.kills:
        hit: set[tuple[str, str]] = set()
        for run in kill.unfinished:
            hit_plan = by_run.get(run)
            if hit_plan is not None:
                hit.add((hit_plan.platform, hit_plan.mode))
                interrupted[(hit_plan.platform, hit_plan.mode)].add(run)
        for key in hit:
            keyed[key]["kills"] += 1
    for key, runs in interrupted.items():
        keyed[key]["interrupted"] = len(runs)
    out = list(keyed.values())
    keys = [key for key, _ in COLUMNS] + ["stops_posted", "media_planned", "doubled_bad"]
    total = {"platform": "all", "mode": "all"} | {key: sum(r.get(key, 0) for r in out) for key in keys}
    total["kills"] = len(outcome.kills)
    total["faults"] = sum(len(calls) for calls in outcome.faulted_calls.values())
    return [*out, total]


def failed(outcome: Outcome) -> bool:
    """Exit code 1: a run lost, lied about, left unfinished, or doubled where that is not allowed."""
    return any(v.bad for v in outcome.verdicts.values())


def table(outcome: Outcome) -> Table:
    o = outcome.options
    title = (
        f"streamrelay chaos: {len(outcome.plans)} runs, seed {o.seed}, {len(outcome.kills)} kills, "
        f"{outcome.elapsed_s:.0f} s"
    )
    t = Table(title=title, caption=backend_caption(o, outcome.faults))
    t.add_column("platform")
    t.add_column("mode")
    for _, label in COLUMNS:
        t.add_column(label, justify="right")
    for row in rows(outcome):
        cells = []
        for key, _ in COLUMNS:
            value = row[key]
            bad = key in ("lost", "lying", "unfinished", "misplaced", "approvals_bad")
            bad = bad or (key == "doubled" and row["doubled_bad"] > 0)  # allowed: reported uncertain, unsettleable
            cell = f"[red]{value}[/]" if bad and value else str(value)
            if key == "media":
                cell += f" of {row.get('media_planned', 0)}"
            elif key == "stops":
                cell += f" ({row.get('stops_posted', 0)})"
            cells.append(cell)
        t.add_row(row["platform"], row["mode"], *cells)
    return t


def backend_caption(options: Options, faults: list[dict[str, Any]] | None = None) -> str | None:
    """``redis``: how the replicas ran (the table's caption), with the primary failovers among ``faults``; None for
    the one SQLite sidecar."""
    if not options.replicated:
        return None
    redis = "one redis-server"
    if options.failovers:
        done = [f["body"] for f in faults or () if f.get("kind") == "primary failover" and f.get("applied")]
        took = ", ".join(f"{f['took_s']:.1f}" for f in done)
        redis = (
            f"a Redis primary + replica + 3 sentinels, the primary killed -9 {len(done)} of {options.failovers} "
            f"times (promotion took {took or '-'} s)"
        )
    return (
        f"backend redis: {options.replicas} replica processes on {redis}, {options.partitions} partitions,"
        f" lease_ttl_s {options.lease_ttl_s:g} (short: a killed replica's partitions move to the others within"
        f" {options.lease_ttl_s * 4 / 3:.1f} s); a kill hits a random replica, restarted as a new one; agents post"
        " to and read from random replicas"
    )


def bad_runs(outcome: Outcome) -> list[dict[str, Any]]:
    """The runs judged bad (or with agent anomalies), with what an investigation needs first."""
    out: list[dict[str, Any]] = []
    for plan in outcome.plans:
        verdict = outcome.verdicts[plan.run]
        record = outcome.records[plan.run]
        if not verdict.bad and not record.anomalies:
            continue
        report = outcome.reports.get(plan.run) or {}
        chat = outcome.states[plan.platform]["chats"].get(str(plan.chat_id), [])
        out.append(
            {
                "run": plan.run,
                "platform": plan.platform,
                "mode": plan.mode,
                "problems": verdict.problems,
                "anomalies": record.anomalies,
                "notes": verdict.notes,
                "answer": {
                    "recording": plan.answer.recording,
                    "chars": len(plan.answer.text),
                    "lines": len(plan.lines),
                },
                "agent": {
                    "sent": record.sent,
                    "confirmed": record.confirmed,
                    "end_confirmed": record.end_confirmed,
                    "gone": record.gone,
                    "kills_seen": record.kills_seen,
                    "resends": record.resends,
                },
                "kills": [k.to_json() for k in outcome.kills if plan.run in k.unfinished or k.run == plan.run],
                "faults": [f for f in outcome.faults if f["run"] == plan.run],
                "stop": outcome.stops.get(plan.run),
                "media": [m.__dict__ for m in plan.media],
                "faulted_calls": outcome.faulted_calls.get(plan.run, []),
                "chat": [
                    {"message_id": m["message_id"], "chars": len(m["text"]), "text": _clip(m["text"])} for m in chat
                ],
                "report": {
                    k: report.get(k)
                    for k in ("status", "end_status", "done", "confirmed", "uncertain", "failed", "unsent", "media")
                }
                | {"message_ids": report.get("message_ids"), "errors": report.get("errors")},
                "transcript": str(outcome.out / "runs" / f"{plan.run}.json"),
            }
        )
    return out


def _clip(text: str, keep: int = 60) -> str:
    return text if len(text) <= 2 * keep + 5 else f"{text[:keep]} … {text[-keep:]}"


def summary(outcome: Outcome) -> dict[str, Any]:
    """The campaign as JSON (what ``--json`` prints and ``summary.json`` holds)."""
    o = outcome.options
    return {
        "runs": len(outcome.plans),
        "seed": o.seed,
        "options": {
            "platforms": list(o.platforms),
            "modes": list(o.modes),
            "exclusive_bot": o.exclusive_bot,
            "concurrency": o.concurrency,
            "long": o.long,
            "run_idle_timeout_s": o.idle_s,
            "send_timeout_ms": o.send_timeout_ms,
            "approval_ttl_s": o.approval_ttl_s,
        }
        | (
            {"backend": o.backend, "replicas": o.replicas, "partitions": o.partitions, "lease_ttl_s": o.lease_ttl_s}
            if o.replicated
            else {}
        ),
        "elapsed_s": outcome.elapsed_s,
        "ok": not failed(outcome),
        "rows": rows(outcome),
        "kills": [k.to_json() | {"unfinished": len(k.unfinished)} for k in outcome.kills],
        "skipped": outcome.skipped,
        "faults": outcome.faults,
        "crashes": outcome.crashes,
        "bad_runs": bad_runs(outcome),
        "out": str(outcome.out),
    }


def write_transcripts(outcome: Outcome, summary_json: dict[str, Any]) -> None:
    """``OUT/runs/<run>.json`` for every run, ``OUT/summary.json`` and ``OUT/chaos.json`` (kills, faults)."""
    runs = outcome.out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    calls_by_chat: defaultdict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for platform, state in outcome.states.items():
        for call in state.get("calls", []):
            calls_by_chat[(platform, str(call.get("chat_id")))].append(call)
    for plan in outcome.plans:
        record = outcome.records[plan.run]
        transcript = {
            "run": plan.run,
            "platform": plan.platform,
            "mode": plan.mode,
            "chat_id": plan.chat_id,
            "answer": {
                "recording": plan.answer.recording,
                "deltas": [plan.answer.start, plan.answer.stop],
                "size": plan.answer.size,
                "text": plan.answer.text,
            },
            "plan": {
                "batches": plan.batches,
                "pace_ms": round(plan.pace_ms, 2),
                "resend": plan.resend,
                "kill": plan.kill.__dict__ if plan.kill else None,
                "fault": plan.fault.__dict__ if plan.fault else None,
                "media": [m.__dict__ for m in plan.media],
                "stop": plan.stop.__dict__ if plan.stop else None,
                "approval": plan.approval.to_json() if plan.approval else None,
            },
            "approval": outcome.approvals[plan.run].to_json() if plan.run in outcome.approvals else None,
            "stop": outcome.stops.get(plan.run),
            "agent": record.to_json(),
            "verdict": outcome.verdicts[plan.run].to_json(),
            "chat": outcome.states[plan.platform]["chats"].get(str(plan.chat_id), []),
            "streams": outcome.states[plan.platform].get("streams", {}).get(str(plan.chat_id), []),
            "report": outcome.reports.get(plan.run),
            "report_when_done": record.report,
            "calls": calls_by_chat.get((plan.platform, str(plan.chat_id)), []),
            "faulted_calls": outcome.faulted_calls.get(plan.run, []),
        }
        (runs / f"{plan.run}.json").write_text(json.dumps(transcript, indent=1, ensure_ascii=False), encoding="utf-8")
    chaos = {"kills": [k.to_json() for k in outcome.kills], "faults": outcome.faults, "skipped": outcome.skipped}
    (outcome.out / "chaos.json").write_text(json.dumps(chaos, indent=1), encoding="utf-8")
    (outcome.out / "summary.json").write_text(json.dumps(summary_json, indent=1, ensure_ascii=False), encoding="utf-8")
