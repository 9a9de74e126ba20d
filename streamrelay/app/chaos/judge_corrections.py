"""Judging a corrected run (docs/corrections.md): once its agent posted a correction, the run's chat must show the
correction's text, each message once, and nothing of the old answer beyond what the correction kept (where it was
posted as a reply, ``fallback: reply``: the old answer, then the correction once); the report's
correction must say ``applied`` and list exactly the messages the chat shows (``after``). A message the correction
deleted is not lost (the judge of vanished messages is not asked), a message it sent twice or a chunk it showed
twice is **doubled**, a chunk missing or an old one left is **lost**, a correction record that lists messages the
chat does not show (or misses some) is **lying**. A create the correction sent again because the platform could not
tell whether the first landed (docs/corrections.md, as an answer's part) may show twice: a message the record does
not list, counted by a step ``uncertain`` whose outcome says "a duplicate is possible", is a **reported double**
(doubled, allowed: never lying); one not so counted is lying, and a double no step reports stays a failure."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamrelay.app.chaos.plan import RunPlan
from streamrelay.core.run.corrections import CORRECTION_HEAD, DUPLICATE

if TYPE_CHECKING:
    from streamrelay.app.chaos.agent import AgentRecord
    from streamrelay.app.chaos.judge import Verdict


def correction_of(plan: RunPlan, record: AgentRecord, report: dict[str, Any] | None) -> dict[str, Any] | None:
    """The run's correction as its final report lists it, when its agent posted one and the sidecar took it (the
    run is then judged against it); None otherwise (the run is judged as it was streamed)."""
    if plan.correction is None or not (record.correction or {}).get("posted") or report is None:
        return None
    made = report.get("corrections") or []
    return next((c for c in made if c.get("id") == plan.correction.id), None)


def judge_corrected(
    verdict: Verdict,
    plan: RunPlan,
    chat: list[dict[str, Any]],
    taken: dict[str, Any],
    norm: Callable[[str], str],
    judge_text: Callable[[str, str], None],
) -> None:
    """Judge a corrected run (module docstring). ``taken``: its correction from the report; ``judge_text``: the
    judge's lost / doubled finding for a chat that differs from the expected (normalized) text."""
    assert plan.correction is not None
    verdict.expected = "corrected"
    shown = "".join(norm(str(m.get("text", ""))) for m in chat)
    want = norm(plan.correction.text)
    if taken.get("fallback") == "reply":  # the answer stays as it showed, the correction replies below it
        want = norm(plan.answer.text) + norm(CORRECTION_HEAD) + want
    changes = taken.get("changes", [])
    uncertain = [c for c in changes if c.get("state") == "uncertain"]
    reported = [c for c in uncertain if DUPLICATE in str(c.get("outcome") or "")]
    after = [str(i) for i in taken.get("after", [])]
    unlisted = [m for m in chat if str(m.get("message_id")) not in after]
    listed = "".join(norm(str(m.get("text", ""))) for m in chat if m not in unlisted)
    if shown != want and unlisted and len(unlisted) <= len(reported) and listed == want:
        verdict.doubled = verdict.doubled_allowed = True  # a create sent again beside one that landed: said
        verdict.problems.append(f"doubled, reported: {len(unlisted)} message(s) the correction says may show twice")
    elif shown != want:
        judge_text(shown, want)
        verdict.doubled_allowed = verdict.doubled and not verdict.lost and bool(reported)
    if uncertain:
        verdict.uncertain = True
    state = taken.get("state")
    if state != "applied":
        verdict.problems.append(f"correction {taken.get('id')}: {state}, not applied: {changes}"[:400])
        if shown == want and not uncertain:
            verdict.lying = True  # the chat shows it whole: a record that says a step failed is wrong
    chat_ids = [str(m.get("message_id")) for m in chat]
    if [i for i in after if i not in chat_ids] or len(unlisted) > len(reported):
        verdict.lying = True
        verdict.problems.append(
            f"lying: the correction lists messages {after}, the chat shows {chat_ids} ({len(reported)} reported "
            "duplicates)"
        )
    if verdict.doubled and not verdict.doubled_allowed and uncertain:
        verdict.notes.append("a doubled chunk of the correction is counted uncertain")
    verdict.notes.append(f"corrected ({len(changes)} changes, {state})")
