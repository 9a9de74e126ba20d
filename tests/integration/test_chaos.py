"""The chaos campaign (``streamrelay chaos``): seeded slices run as an operator would (the command in its own
process, which starts the mocks and the sidecar as processes of their own, on 127.0.0.1), and the judge's rules on
made-up chats.

Slices: 24 runs over Telegram (exclusive bot), Slack and Discord, preview and block, with kills and faults; a
small Telegram shared-bot slice, where a fixed part whose send timed out is not sent again (it may be missing,
and is then reported uncertain); and 24 runs against three replicas on Redis (``--backend redis --replicas 3``),
kills hitting random replicas (skipped without redis-server, unless ``STREAMRELAY_REQUIRE_REDIS=1``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from streamrelay.adapters.registry import REGISTRY
from streamrelay.app.chaos.agent import AgentRecord
from streamrelay.app.chaos.answers import Answer, load_recordings, run_lines, text_of
from streamrelay.app.chaos.judge import judge
from streamrelay.app.chaos.plan import PLATFORMS, Options, RunPlan, make_plan
from streamrelay.app.chaos.procs import stop_leftovers
from streamrelay.core.run.stage import IDLE_NOTICE

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN_TIMEOUT_S = 240

NO_REDIS = "no redis-server on PATH (the replicas' slice starts one): apt-get install redis-server"

TELEGRAM_UNSETTLED_LOST = (
    "issue 10 chaos finding: a Telegram create whose outcome stays unknown (a 5xx, timeout or reset of the send, an "
    "outage, a kill between its intent and its answer) is never sent again; with a shared bot always, with an "
    "exclusive bot in a private chat when the send did not land (the probe cannot prove it absent there): that part "
    "of the answer never reaches the chat (report: partial, uncertain)"
)


def _campaign(out: Path, *args: str) -> dict[str, Any]:
    """Run ``streamrelay chaos --json`` in its own process; its JSON summary. The campaign and everything it
    started are stopped whatever happens (SIGTERM, then SIGKILL; leftovers by their recorded ids)."""
    argv = [sys.executable, "-m", "streamrelay", "chaos", "--json", "--out", str(out), "--idle-timeout-s", "12", *args]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stdout, stderr = proc.communicate(timeout=CAMPAIGN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        raise AssertionError(f"the campaign took longer than {CAMPAIGN_TIMEOUT_S} s (transcripts in {out})") from None
    finally:
        stop_leftovers(out)
    assert stdout, f"no JSON from the campaign (exit {proc.returncode}): {stderr.decode()[-2000:]}"
    summary: dict[str, Any] = json.loads(stdout)
    assert proc.returncode == (0 if summary["ok"] else 1)
    return summary


@pytest.fixture(scope="module")
def exclusive(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("chaos-exclusive")
    return _campaign(
        out, "--runs", "24", "--seed", "7", "--kill-every", "4", "--fault-every", "2", "--concurrency", "6"
    )


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Seed 3's run chaos-3-00009 asks an approval (deny) in a request the second kill cuts after the sidecar
    journaled it; its agent never comes back, so nobody presses and the run waits for the approval's ttl, then its
    idle timeout. With the campaign's default ttl (120 s) the slice took 169 s instead of about 60:
    ``--approval-ttl-s 20`` (still far above the approver's press, 0.1-1.5 s, and a restart, about 6 s)."""
    out = tmp_path_factory.mktemp("chaos-shared")
    args = ("--runs", "10", "--seed", "3", "--platform", "telegram", "--shared-bot", "--kill-every", "4")
    return _campaign(out, *args, "--fault-every", "2", "--approval-ttl-s", "20")


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if shutil.which("redis-server") is None:
        if os.environ.get("STREAMRELAY_REQUIRE_REDIS") == "1":
            pytest.fail(NO_REDIS, pytrace=False)
        pytest.skip(NO_REDIS)
    out = tmp_path_factory.mktemp("chaos-redis")
    args = ("--backend", "redis", "--replicas", "3", "--lease-ttl-s", "2", "--runs", "24", "--seed", "7")
    return _campaign(out, *args, "--kill-every", "4", "--fault-every", "2", "--concurrency", "6")


@pytest.fixture(scope="module")
def idle_closed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An idle timeout (1 s) shorter than an agent takes to come back after a kill (``--agent-back-s 3``: it re-sends
    3 s after the sidecar answers again): a run resumed after a kill gets its idle time afresh from its resume (issue
    24, item 6), and is closed with what it had before its agent's replay comes, and the agent's lines it never took
    are refused (409). Before the agents waited: the slice counted on restarts slower than the idle timeout (0.5 s),
    and one CI run saw no run closed (the test below failed: "the slice tried nothing"). Seed 10: 8 runs closed so
    (seed 9: none, its kills fall where no agent re-sends; seed 8 shows an open defect of corrections: a correction's
    send cut by a kill in a Telegram private chat was not sent again, chaos-8-00022: fixed since). Every mode, native
    too: with native runs in its plan, seed 10 found a defect of the idle close in one process (chaos-10-00017: a kill
    between the idle close's notice and the run's recorded end resumed the run open; it took the agent's later lines
    and ended ``delivered`` under the false notice). Fixed: the close is journaled before its notice and such a run
    resumes closed (tests/integration/test_idle_resume.py); the slice ran preview and block only meanwhile."""
    out = tmp_path_factory.mktemp("chaos-idle")
    args: tuple[str, ...] = ("--runs", "24", "--seed", "10", "--platform", "telegram")
    args += ("--kill-every", "2", "--fault-every", "50")
    return _campaign(out, *args, "--idle-timeout-s", "1", "--agent-back-s", "3", "--concurrency", "6")


def _rows(summary: dict[str, Any], platform: str) -> list[dict[str, Any]]:
    return [r for r in summary["rows"] if r["platform"].startswith(platform)]


def _bad(summary: dict[str, Any], platform: str) -> list[str]:
    return [f"{b['run']} ({b['mode']}): {b['problems']}" for b in summary["bad_runs"] if b["platform"] == platform]


# ---------------------------------------------------------------- the slices


@pytest.mark.xdist_group("chaos-exclusive")  # one campaign, one worker
@pytest.mark.timeout(CAMPAIGN_TIMEOUT_S + 60)
def test_slice_kills_restarts_and_faults_happen(exclusive: dict[str, Any]) -> None:
    total = exclusive["rows"][-1]
    assert total["runs"] == 24
    rows = [(r["platform"].split(",")[0], r["mode"]) for r in exclusive["rows"][:-1]]
    assert [row for row in rows if row[1] != "native"] == [(p, m) for p in PLATFORMS for m in ("preview", "block")]
    # about a third of the native platforms' runs stream natively (seed 7: one Slack, one Telegram run, each with an
    # in-flight kill aimed at its stream's methods): a native slice at no extra process cost
    assert {row for row in rows if row[1] == "native"} == {("slack", "native"), ("telegram", "native")}
    assert total["kills"] >= 1 and total["interrupted"] >= 1
    assert total["faults"] >= 1
    assert total["unfinished"] == 0, exclusive["bad_runs"]
    assert not exclusive["crashes"]
    out = Path(exclusive["out"])
    assert len(list((out / "runs").glob("*.json"))) == 24
    assert "resumed" in (out / "sidecar.log").read_text(encoding="utf-8", errors="replace")


@pytest.mark.xdist_group("chaos-exclusive")  # one campaign, one worker
@pytest.mark.timeout(CAMPAIGN_TIMEOUT_S + 60)
@pytest.mark.parametrize("platform", [p for p in PLATFORMS if p != "telegram"])
def test_slice_exactly_once(exclusive: dict[str, Any], platform: str) -> None:
    dry = REGISTRY[platform].dry_run
    # a platform that cannot settle: a double reported uncertain is allowed (none now: Teams settles through Microsoft
    # Graph, WhatsApp by its status webhooks, so both are held to no double at all)
    unsettleable = dry is not None and dry.unsettleable
    for row in _rows(exclusive, platform):
        # native: a stream whose start was never answered (Teams cannot settle one) is a double reported uncertain
        doubled = row["doubled_bad"] if unsettleable or row["mode"] == "native" else row["doubled"]
        assert (row["lost"], doubled, row["lying"], row["unfinished"]) == (0, 0, 0, 0), _bad(exclusive, platform)


@pytest.mark.xdist_group("chaos-exclusive")  # one campaign, one worker
@pytest.mark.timeout(CAMPAIGN_TIMEOUT_S + 60)
def test_slice_telegram_exclusive_bot_exactly_once(exclusive: dict[str, Any]) -> None:
    for row in _rows(exclusive, "telegram"):
        assert (row["lost"], row["doubled"], row["lying"], row["unfinished"]) == (0, 0, 0, 0), _bad(
            exclusive, "telegram"
        )


@pytest.mark.xdist_group("chaos-shared")  # one campaign, one worker
@pytest.mark.timeout(CAMPAIGN_TIMEOUT_S + 60)
def test_telegram_shared_bot_every_double_reported_uncertain(shared: dict[str, Any]) -> None:
    rows = _rows(shared, "telegram")
    assert {r["platform"] for r in rows} == {"telegram, shared bot"}
    assert {r["mode"] for r in rows} == {"preview", "block", "native"}  # native: a third of them (--mode all)
    assert sum(r["lying"] for r in rows) == 0, _bad(shared, "telegram")
    assert sum(r["unfinished"] for r in rows) == 0, _bad(shared, "telegram")
    assert shared["rows"][-1]["kills"] >= 1


@pytest.mark.xdist_group("chaos-shared")  # one campaign, one worker
@pytest.mark.timeout(CAMPAIGN_TIMEOUT_S + 60)
def test_telegram_shared_bot_a_lost_part_is_always_reported_uncertain(shared: dict[str, Any]) -> None:
    # With a shared token an unknown create cannot be settled; a fixed part is not sent again (the
    # timeout-then-continue case): it may be missing, and then the report must say uncertain, never delivered.
    def has(bad: dict[str, Any], problem: str) -> bool:
        return any(p.startswith(problem) for p in bad["problems"])

    lost = [b for b in shared["bad_runs"] if b["platform"] == "telegram" and has(b, "lost")]
    assert all((b["report"]["uncertain"] or 0) > 0 and not has(b, "lying") for b in lost), lost


@pytest.mark.xdist_group("chaos-replicated")  # one campaign, one worker
@pytest.mark.timeout(CAMPAIGN_TIMEOUT_S + 60)
def test_replicas_slice_kills_random_replicas_and_loses_nothing(replicated: dict[str, Any]) -> None:
    total = replicated["rows"][-1]
    assert total["runs"] == 24
    rows = [(r["platform"].split(",")[0], r["mode"]) for r in replicated["rows"][:-1]]
    assert [row for row in rows if row[1] != "native"] == [(p, m) for p in PLATFORMS for m in ("preview", "block")]
    assert {row for row in rows if row[1] == "native"} == {("slack", "native"), ("telegram", "native")}
    options = replicated["options"]
    assert (options["backend"], options["replicas"], options["lease_ttl_s"]) == ("redis", 3, 2.0)
    assert total["kills"] >= 1 and total["interrupted"] >= 1 and total["faults"] >= 1
    assert all(k["replica"] in ("replica-1", "replica-2", "replica-3") for k in replicated["kills"])
    bad = [f"{b['run']} ({b['platform']}/{b['mode']}): {b['problems']}" for b in replicated["bad_runs"]]
    assert (total["lying"], total["unfinished"]) == (0, 0), bad
    # A part lost only where the platform cannot settle it here, and then reported uncertain: WhatsApp on replicas
    # takes silence as "never stored" only while no replica that heard statuses lately is dead (one it swallowed comes
    # again at Meta's next try, maybe after the window: docs/replicas.md); a create cut then stays uncertain, never
    # sent again, listed by `streamrelay deliveries` for a resend. Any other platform: nothing lost.
    lost = [b for b in replicated["bad_runs"] if any(p.startswith("lost") for p in b["problems"])]
    assert all(b["platform"] == "whatsapp" and (b["report"]["uncertain"] or 0) > 0 for b in lost), bad
    for row in replicated["rows"][:-1]:  # a double only where the platform cannot settle, and then reported
        dry = REGISTRY[row["platform"].split(",")[0]].dry_run
        unsettled = (dry is not None and dry.unsettleable) or row["mode"] == "native"  # native: a Teams stream start
        assert row["doubled_bad" if unsettled else "doubled"] == 0, bad
    others = [b for b in replicated["bad_runs"] if b not in lost]
    assert (replicated["ok"] or not others) and not replicated["crashes"], bad
    out = Path(replicated["out"])
    assert len(list((out / "runs").glob("*.json"))) == 24
    logs = "".join((out / f"replica-{n}.log").read_text(encoding="utf-8", errors="replace") for n in (1, 2, 3))
    assert "taken" in logs  # partitions changed hands
    assert not (out / "ledger.sqlite3").exists()


@pytest.mark.xdist_group("chaos-idle-closed")  # one campaign, one worker
@pytest.mark.timeout(CAMPAIGN_TIMEOUT_S + 60)
def test_an_agent_refused_after_an_idle_close_is_judged_by_what_was_taken(idle_closed: dict[str, Any]) -> None:
    # Before: the agent counted its end as confirmed after the 409s, so the judge wanted every media item of the
    # answer (lines the sidecar never took) and called them lost (chaos seed 71, 1,000 runs under load: 9 "lost").
    total = idle_closed["rows"][-1]
    assert total["kills"] >= 1
    assert (total["lost"], total["doubled"], total["lying"], total["unfinished"]) == (0, 0, 0, 0), _bad(
        idle_closed, "telegram"
    )
    agents = [json.loads(p.read_text())["agent"] for p in (Path(idle_closed["out"]) / "runs").glob("*.json")]
    closed = [a for a in agents if a["gone"] == "closed"]
    assert closed, "no run was closed by the idle timeout before its agent came back: the slice tried nothing"
    assert not any(a["end_confirmed"] for a in closed)


# ---------------------------------------------------------------- the plan and the judge


def test_plan_is_a_function_of_its_seed() -> None:
    recordings = load_recordings()
    one = make_plan(Options(runs=30, seed=4), recordings)
    two = make_plan(Options(runs=30, seed=4), recordings)
    other = make_plan(Options(runs=30, seed=5), recordings)
    assert [(p.run, p.combo, p.answer, p.batches, p.kill, p.fault) for p in one] == [
        (p.run, p.combo, p.answer, p.batches, p.kill, p.fault) for p in two
    ]
    assert [p.answer for p in one] != [p.answer for p in other]
    assert len({p.chat_id for p in one}) == 30  # each run its own chat
    assert all(line["seq"] == i for p in one for i, line in enumerate(p.lines))
    assert sum(p.kill is not None for p in one) >= 2


def _plan(pieces: tuple[str, ...], platform: str = "discord") -> RunPlan:
    answer = Answer("made-up", 0, len(pieces), "short", pieces)
    lines = run_lines("r1", platform, 1, "preview", answer)
    return RunPlan(0, "r1", platform, "preview", 1, answer, lines, (len(lines),), 1.0, (True,))


def _finished(plan: RunPlan) -> AgentRecord:
    n = len(plan.lines)
    return AgentRecord(plan.run, sent=n, confirmed=n, end_confirmed=True)


def _chat(*texts: str) -> list[dict[str, Any]]:
    return [{"message_id": str(i + 1), "text": t} for i, t in enumerate(texts)]


def _report(chat: list[dict[str, Any]], status: str = "delivered", uncertain: int = 0) -> dict[str, Any]:
    return {"done": True, "status": status, "uncertain": uncertain, "message_ids": [m["message_id"] for m in chat]}


PIECES = ("Hello there, this is ", "the first paragraph.\n\n```python\nprint(1)\n", "```\n\nAnd the second one.")


def test_judge_exact_even_with_reopened_fences_and_other_whitespace() -> None:
    plan = _plan(PIECES)
    chat = _chat(
        "Hello there, this is the first paragraph.\n\n```python\nprint(1)\n```", "```python\n```\nAnd the second one."
    )
    verdict = judge(plan, _finished(plan), chat, _report(chat), exclusive_bot=True)
    assert not verdict.bad and not verdict.problems


def test_judge_lost_tail_and_a_delivered_report_lies() -> None:
    plan = _plan(PIECES)
    chat = _chat("Hello there, this is the first paragraph.")
    verdict = judge(plan, _finished(plan), chat, _report(chat), exclusive_bot=True)
    assert verdict.lost and not verdict.doubled and verdict.lying


def test_judge_hole_in_the_middle_is_lost_even_when_reported_uncertain() -> None:
    plan = _plan(PIECES)
    chat = _chat("Hello there, this is", "And the second one.")
    verdict = judge(plan, _finished(plan), chat, _report(chat, "partial", uncertain=1), exclusive_bot=True)
    assert verdict.lost and not verdict.lying and verdict.bad


def test_judge_duplicate_message_unreported_is_doubled_and_lying() -> None:
    plan = _plan(PIECES)
    first = "Hello there, this is the first paragraph.\n```python\nprint(1)\n```"
    chat = _chat(first, first, "And the second one.")
    verdict = judge(plan, _finished(plan), chat, _report(chat), exclusive_bot=True)
    assert verdict.doubled and not verdict.lost and verdict.lying


def test_judge_telegram_shared_bot_double_reported_uncertain_is_allowed() -> None:
    plan = _plan(PIECES, platform="telegram")
    first = "Hello there, this is the first paragraph.\n```python\nprint(1)\n```"
    chat = _chat(first, first, "And the second one.")
    report = _report(chat, "partial", uncertain=1)
    report["message_ids"] = ["2", "3"]  # the first copy is the uncertain part's: an orphan the report counts
    assert judge(plan, _finished(plan), chat, report, exclusive_bot=False).doubled_allowed
    verdict = judge(plan, _finished(plan), chat, report, exclusive_bot=True)
    assert verdict.doubled and verdict.bad


def test_judge_whatsapp_double_is_bad_where_status_webhooks_settle_allowed_where_none_arrive() -> None:
    plan = _plan(PIECES, platform="whatsapp")  # settled by its status webhooks (one sidecar): no double allowed
    first = "Hello there, this is the first paragraph.\n```python\nprint(1)\n```"
    chat = _chat(first, first, "And the second one.")
    report = _report(chat, "partial", uncertain=1)
    report["message_ids"] = ["2", "3"]
    verdict = judge(plan, _finished(plan), chat, report, exclusive_bot=True)
    assert verdict.doubled and not verdict.doubled_allowed and verdict.bad
    # a sidecar that receives no status webhooks cannot settle: a reported double is allowed
    replicas = judge(plan, _finished(plan), chat, report, exclusive_bot=True, status_webhooks=False)
    assert replicas.doubled and replicas.doubled_allowed and not replicas.bad
    unreported = judge(plan, _finished(plan), chat, _report(chat), exclusive_bot=True, status_webhooks=False)
    assert unreported.lying and unreported.bad


def test_judge_a_short_reported_copy_before_a_prefix_is_a_double_not_text_out_of_order() -> None:
    # chaos seed 5 on teams (before it settled through Graph; the same holds on any platform that cannot settle, here
    # Telegram with a shared bot): a 5-character create timed out, was reported uncertain ("a duplicate is possible")
    # and the part went on in a new message; the agent was killed before any line was acknowledged. The chat showed
    # "Hello" then the whole prefix: too short for the repeat check, it was judged lost (out of order).
    plan = _plan(PIECES, platform="telegram")
    gone = AgentRecord(plan.run, sent=3, confirmed=0, gone="stream")
    journaled = text_of(plan.lines, 2)  # the sidecar journaled the first lines the agent sent
    assert journaled.startswith("Hello there, this is")
    chat = _chat("Hello", journaled, IDLE_NOTICE)
    report = _report(chat, "partial", uncertain=1)
    report["message_ids"] = ["2", "3"]
    verdict = judge(plan, gone, chat, report, exclusive_bot=False)
    assert verdict.doubled and verdict.doubled_allowed and not verdict.lost and not verdict.bad, verdict.problems
    listed = _report(chat, "partial", uncertain=1)  # the report lists the copy: nothing explains it
    assert judge(plan, gone, chat, listed, exclusive_bot=False).bad


def test_judge_orphans_and_strange_ids_are_lies() -> None:
    plan = _plan(PIECES)
    chat = _chat("".join(PIECES))
    report = _report(chat)
    report["message_ids"] = ["9"]
    verdict = judge(plan, _finished(plan), chat, report, exclusive_bot=True)
    assert verdict.lying and any("does not list" in p for p in verdict.problems)
    assert any("does not show" in p for p in verdict.problems)


def test_judge_agent_gone_mid_stream_keeps_what_was_acknowledged() -> None:
    plan = _plan(PIECES)
    gone = AgentRecord(plan.run, sent=3, confirmed=2, gone="stream")  # run.start and the first piece acknowledged
    for shown in ("Hello there, this is", "Hello there, this is the first paragraph.\n```python\nprint(1)"):
        chat = _chat(shown, IDLE_NOTICE)
        verdict = judge(plan, gone, chat, _report(chat, "partial"), exclusive_bot=True)
        assert not verdict.bad, verdict.problems
    chat = _chat(IDLE_NOTICE)
    assert judge(plan, gone, chat, _report(chat, "partial"), exclusive_bot=True).lost


def test_judge_unfinished_run() -> None:
    plan = _plan(PIECES)
    chat = _chat("".join(PIECES))
    verdict = judge(plan, _finished(plan), chat, {"done": False, "status": "pending"}, exclusive_bot=True)
    assert verdict.unfinished and verdict.bad
    assert judge(plan, _finished(plan), chat, None, exclusive_bot=True).lying


def test_judge_a_pending_report_is_unfinished_not_lying() -> None:
    """A report not done is a snapshot of a delivery under way (seed 72: its last two posts landed between the
    report's read and the chat's): unfinished is the finding, not a lie about messages it had not listed yet."""
    plan = _plan(PIECES)
    chat = _chat(PIECES[0], PIECES[1] + PIECES[2])
    pending = {"done": False, "status": "pending", "uncertain": 0, "message_ids": ["1"]}
    verdict = judge(plan, _finished(plan), chat, pending, exclusive_bot=True)
    assert verdict.unfinished and verdict.bad and not verdict.lying, verdict.problems


def test_judge_a_pending_run_showing_a_prefix_is_unfinished_not_lost() -> None:
    """Seed 72: a Slack preview whose final waited in the workspace's edit queue through restarts showed its first
    post when judged and ended delivered 12 s later: unfinished, not lost. A pending run whose chat is no prefix of
    the answer is still judged lost."""
    plan = _plan(PIECES)
    pending = {"done": False, "status": "pending", "uncertain": 0, "message_ids": ["1"]}
    verdict = judge(plan, _finished(plan), _chat(PIECES[0]), pending, exclusive_bot=True)
    assert verdict.unfinished and verdict.bad and not verdict.lost, verdict.problems
    assert judge(plan, _finished(plan), _chat(PIECES[1]), pending, exclusive_bot=True).lost


def _corrected(plan: RunPlan, text: str, after: list[str], state: str = "applied") -> tuple[AgentRecord, Any]:
    from streamrelay.app.chaos.plan import CorrectionPlan

    plan.correction = CorrectionPlan("fix-0", text)
    record = _finished(plan)
    record.correction = {"posted": True, "status": 200}
    return record, {"id": "fix-0", "kind": "correct", "state": state, "after": after, "changes": []}


def test_judge_a_corrected_run_against_its_new_final() -> None:
    plan = _plan(PIECES)
    record, taken = _corrected(plan, "The new first line.\n\nThe new second line.", ["1", "2"])
    chat = _chat("The new first line.", "The new second line.")
    report = {**_report(_chat(*PIECES)), "corrections": [taken]}
    verdict = judge(plan, record, chat, report, exclusive_bot=True)
    assert not verdict.bad and verdict.expected == "corrected", verdict.problems
    old_left = judge(
        plan, record, [*chat, {"message_id": "3", "text": "And the second one."}], report, exclusive_bot=True
    )
    assert old_left.bad and old_left.lying  # a message the correction does not list
    twice = _chat("The new first line.", "The new second line.", "The new second line.")
    doubled = judge(
        plan, record, twice, {**report, "corrections": [{**taken, "after": ["1", "2", "3"]}]}, exclusive_bot=True
    )
    assert doubled.doubled and doubled.bad
    lost = judge(plan, record, chat[:1], {**report, "corrections": [{**taken, "after": ["1"]}]}, exclusive_bot=True)
    assert lost.lost and lost.bad


def test_judge_a_correction_not_applied_is_a_finding() -> None:
    plan = _plan(PIECES)
    record, taken = _corrected(plan, "The new first line.", ["1"], state="partial")
    chat = _chat("The new first line.")
    verdict = judge(plan, record, chat, {**_report(chat), "corrections": [taken]}, exclusive_bot=True)
    assert verdict.lying and verdict.bad and "not applied" in verdict.problems[0]


def test_judge_a_correction_sent_again_where_the_platform_could_not_tell() -> None:
    """chaos-8-00022: a correction's send cut by a kill in a Telegram private chat is sent again (as an answer's part
    is) and its first create reported: "a duplicate is possible". The chat showing the chunk twice, the record
    listing one of them and saying so: doubled, allowed, uncertain, never lying; the first create not landed: the
    chat whole, the record partial and uncertain, not lying. The same double with no step saying so is bad."""
    plan = _plan(PIECES)
    record, taken = _corrected(plan, "The new first line.\n\nThe new second line.", ["1", "3"], state="partial")
    said = "cut by a restart; telegram cannot tell whether it landed; a message of 20 characters may show too"
    taken["changes"] = [
        {"op": "edit", "message_id": "1", "state": "done", "outcome": "edited"},
        {"op": "send", "message_id": None, "state": "uncertain", "outcome": f"{said} (a duplicate is possible)"},
        {"op": "send", "message_id": "3", "state": "done", "outcome": "sent after the answer's last message"},
    ]
    twice = _chat("The new first line.", "The new second line.", "The new second line.")
    report = {**_report(_chat(*PIECES)), "corrections": [taken]}
    doubled = judge(plan, record, twice, report, exclusive_bot=True)
    assert doubled.doubled and doubled.uncertain and not doubled.lying and not doubled.bad, doubled.problems
    once = _chat("The new first line.", "The new second line.")
    once[1]["message_id"] = "3"
    whole = judge(plan, record, once, report, exclusive_bot=True)
    assert whole.uncertain and not whole.lying and not whole.bad, whole.problems
    unsaid = {**taken, "changes": [{**c, "outcome": "edited"} for c in taken["changes"]]}
    hidden = judge(plan, record, twice, {**report, "corrections": [unsaid]}, exclusive_bot=True)
    assert hidden.bad and hidden.lying  # a message the record does not list, no step saying it may show


def test_judge_a_correction_posted_as_a_reply_keeps_the_old_answer_before_it() -> None:
    plan = _plan(PIECES, platform="whatsapp")
    record, taken = _corrected(plan, "The new answer.", ["1", "2", "3"])
    taken["fallback"] = "reply"
    chat = _chat("Hello there, this is the first paragraph.\n\n```python\nprint(1)\n```", "And the second one.")
    chat.append({"message_id": "3", "text": "✏️ Correction:\n\nThe new answer."})
    verdict = judge(plan, record, chat, {**_report(chat[:2]), "corrections": [taken]}, exclusive_bot=True)
    assert not verdict.bad, verdict.problems
