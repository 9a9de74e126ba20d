"""Judging a corrected run (docs/corrections.md): once its agent posted a correction, the run's chat must show the
correction's text, each message once, and nothing of the old answer beyond what the correction kept (where it was
posted as a reply, ``fallback: reply``: the old answer, then the correction once); the report's
correction must say ``applied`` and list exactly the messages the chat shows (``after``). A message the correction
deleted is not lost (the judge of vanished messages is not asked), a message it sent twice or a chunk it showed
twice is **doubled**, a chunk missing or an old one left is **lost**, a correction record that lists messages the
chat does not show (or misses some) is **lying**."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamrelay.app.chaos.plan import RunPlan
from streamrelay.core.run.corrections import CORRECTION_HEAD

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
    if shown != want:
        judge_text(shown, want)
    state = taken.get("state")
    uncertain = [c for c in taken.get("changes", []) if c.get("state") == "uncertain"]
    if uncertain:
        verdict.uncertain = True
    if state != "applied":
        verdict.problems.append(f"correction {taken.get('id')}: {state}, not applied: {taken.get('changes')}"[:400])
        if shown == want:
            verdict.lying = True  # the chat shows it whole: a record that says otherwise is wrong
    chat_ids = [str(m.get("message_id")) for m in chat]
    after = [str(i) for i in taken.get("after", [])]
    if sorted(chat_ids) != sorted(after):
        verdict.lying = True
        verdict.problems.append(f"lying: the correction lists messages {after}, the chat shows {chat_ids}")
    if verdict.doubled and uncertain:
        verdict.notes.append("a doubled chunk of the correction is counted uncertain")
    verdict.notes.append(f"corrected ({len(taken.get('changes', []))} changes, {state})")
