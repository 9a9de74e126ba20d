"""The judge's rules for media items and a reader's stop (:mod:`app.chaos.judge` calls them).

Media (README "Media"): a mock shows a media message as its caption (``GET /_mock/state``: Telegram's sendPhoto /
sendDocument / sendAudio / sendVideo caption, Slack's image title or file link label, Discord's embed description),
and every planned caption names its run and item, so a chat message whose whole text is a caption is that item.

- **media doubled**: an item shown more than once, or more media messages than the report confirms plus counts
  uncertain.
- **media lost**: an item the run must show (its line acknowledged and the run not stopped, or text after it
  shown) is not shown, and the report does not count a media part uncertain for it; or its caption is merged into
  a text message.
- **misplaced**: a media message whose text before it (the answer's text messages, normalized) is not exactly the
  answer's text before the item (a prefix of it only when the report counts uncertain parts).
- **lying**: the report confirms a media part whose message the chat shows as text, or confirms more media than
  the chat shows.

Stop (README "Stop: a person ends a run"): a run whose report ends ``cancelled`` shows a prefix of the text its
agent had sent when the stop was answered (any prefix: what was shown at the stop stays, nothing after it), the
notice "⏹ Stopped." once (absent only when the report counts its notice part uncertain or failed), and a report that
is not ``delivered``. A stop racing the agent's ``end`` may end either way: the report's ``end_status`` decides which
rules apply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamrelay.app.chaos.answers import text_of
from streamrelay.core.run.stage import STOPPED_NOTICE

if TYPE_CHECKING:
    from streamrelay.app.chaos.judge import Verdict
    from streamrelay.app.chaos.plan import RunPlan

CANCELLED = "cancelled"
"""The ``end_status`` of a stopped run's report (core/run/stage.py; tests/integration/test_stop.py)."""


def media_parts(report: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The report's parts of role ``media``."""
    return [p for p in (report or {}).get("parts", []) or [] if p.get("role") == "media"]


def split_media(plan: RunPlan, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    """``messages`` (no notices) as the text messages and, per chat position, the plan's media item index shown
    there (-1: a text message)."""
    captions = {m.caption: k for k, m in enumerate(plan.media)}
    kinds = [captions.get(str(m.get("text", "")).strip(), -1) for m in messages]
    return [m for m, k in zip(messages, kinds, strict=True) if k < 0], kinds


def judge_media(
    verdict: Verdict,
    plan: RunPlan,
    messages: list[dict[str, Any]],
    report: dict[str, Any] | None,
    must_show: int,
    norm: Any,
) -> None:
    """Check the run's media items against the chat (``messages``: no notices) and the report.

    Args:
        verdict: updated in place (``media_shown``, ``doubled``, ``lost``, ``misplaced``, ``lying``, problems).
        must_show: the items whose line index is below this must show (the lines acknowledged; 0 for a stopped
            run, which sends no more media).
        norm: the judge's text normalizer for the run's platform (``norm(text) -> str``).
    """
    if not plan.media:
        return
    _, kinds = split_media(plan, messages)
    lines = [i for i, line in enumerate(plan.lines) if line.get("kind") == "media"]
    parts = media_parts(report)
    uncertain = sum(p.get("state") == "uncertain" for p in parts)
    acked_ids = {str(p.get("message_id")) for p in parts if p.get("state") == "acked"}
    texts_uncertain = int((report or {}).get("uncertain", 0) or 0)
    listed = {str(i) for i in (report or {}).get("message_ids", [])} if texts_uncertain else None
    verdict.media_shown = sum(k >= 0 for k in kinds)
    shown = len("".join(norm(str(m.get("text", ""))) for m, k in zip(messages, kinds, strict=True) if k < 0))
    missing = 0
    for k, item in enumerate(plan.media):
        count = kinds.count(k)
        if count > 1:
            verdict.doubled = True
            verdict.problems.append(f"doubled: media {k + 1} ({item.kind}) shown {count} times")
        # it must show once acknowledged, or once text after it shows (a stopped run too: its text went on)
        if count == 0 and (lines[k] < must_show or shown > len(norm(text_of(plan.lines, lines[k])))):
            missing += 1
        if count >= 1:
            _check_place(verdict, plan, messages, kinds, k, lines[k], texts_uncertain, norm, listed)
    if missing > uncertain:
        verdict.lost = True
        verdict.problems.append(
            f"lost: {missing} media item(s) not shown though acknowledged or followed by shown text; the report"
            f" counts {uncertain} uncertain"
        )
    if verdict.media_shown > len(acked_ids) + uncertain:
        verdict.doubled = True
        verdict.problems.append(
            f"doubled: {verdict.media_shown} media messages shown, the report confirms {len(acked_ids)} and counts"
            f" {uncertain} uncertain"
        )
    for m, k in zip(messages, kinds, strict=True):
        text = str(m.get("text", ""))
        if k < 0 and any(item.caption in text for item in plan.media):
            verdict.lost = True
            verdict.problems.append(f"lost: a media caption merged into text message {m.get('message_id')}")
        if k < 0 and str(m.get("message_id")) in acked_ids:
            verdict.lying = True
            verdict.problems.append(f"lying: the report confirms media part {m.get('message_id')}, a text message")
    if int((report or {}).get("media", 0) or 0) > verdict.media_shown:
        verdict.lying = True
        verdict.problems.append(
            f"lying: the report confirms {report and report.get('media')} media, the chat shows {verdict.media_shown}"
        )


def _check_place(
    verdict: Verdict,
    plan: RunPlan,
    messages: list[dict[str, Any]],
    kinds: list[int],
    k: int,
    line: int,
    texts_uncertain: int,
    norm: Any,
    listed: set[str] | None = None,
) -> None:
    """The text shown before media item ``k``'s first message is the answer's text before its line. When the report
    counts uncertain parts (``listed``: the message ids it names), the text messages it does not name (at most that
    many: a create it reports may show twice) may be left out: a reported double does not move the item."""
    at = kinds.index(k)
    texts = [m for m, j in zip(messages[:at], kinds[:at], strict=True) if j < 0]
    before = "".join(norm(str(m.get("text", ""))) for m in texts)
    expected = norm(text_of(plan.lines, line))
    if before == expected or (texts_uncertain and expected.startswith(before)):
        return
    unlisted = [m for m in texts if listed is not None and str(m.get("message_id")) not in listed]
    if unlisted and len(unlisted) <= texts_uncertain:
        kept = "".join(norm(str(m.get("text", ""))) for m in texts if m not in unlisted)
        if kept == expected or expected.startswith(kept):
            return
    verdict.misplaced = True
    verdict.problems.append(
        f"misplaced: media {k + 1} shown after {len(before)} characters of text, the answer puts it after"
        f" {len(expected)}"
    )


def judge_vanished(
    verdict: Verdict, chat: list[dict[str, Any]], calls: list[dict[str, Any]], creates: set[str]
) -> None:
    """Every message the platform created for the run (a call of ``creates`` answered ok with its id: a person
    may have read it) is still in the chat: the text shown stays (a stop finalizes what is shown as it is; no
    delivery mode takes back what it showed). One gone is lost."""
    shown = {str(m.get("message_id")) for m in chat}
    created = [
        str(c["message_id"]) for c in calls if c.get("method") in creates and c.get("ok") and c.get("message_id")
    ]
    gone = [i for i in created if i not in shown]
    if gone:
        verdict.lost = True
        verdict.problems.append(f"lost: message(s) {gone[:5]} were created (answered ok) and are gone from the chat")


def judge_stop(verdict: Verdict, chat: list[dict[str, Any]], report: dict[str, Any], shown: str, high: str) -> None:
    """A stopped run (its report ends ``cancelled``): ``shown`` (the text messages, normalized) is a prefix of
    ``high`` (the text its agent had sent when the stop was answered, normalized), the notice once, the report not
    ``delivered``."""
    verdict.stopped = True
    if not high.startswith(shown):
        longer = len(shown) > len(high)
        verdict.doubled = verdict.doubled or longer
        verdict.lost = verdict.lost or not longer
        at = next((i for i, (a, b) in enumerate(zip(high, shown, strict=False)) if a != b), min(len(high), len(shown)))
        verdict.problems.append(
            f"{'doubled' if longer else 'lost'}: a stopped run's chat is not a prefix of what was sent before the"
            f" stop ({len(shown)} characters shown of {len(high)}; first difference at {at}: sent"
            f" {high[at : at + 40]!r}, chat {shown[at : at + 40]!r})"
        )
    notices = sum(str(m.get("text", "")).strip().startswith(STOPPED_NOTICE) for m in chat)
    parts = [p for p in report.get("parts", []) or [] if p.get("role") == "notice"]
    acked = sum(p.get("state") == "acked" for p in parts)
    unsure = sum(p.get("state") in ("uncertain", "failed", "pending") for p in parts)
    if notices > 1:
        verdict.doubled = True
        verdict.problems.append(f"doubled: the stop notice shown {notices} times")
    elif notices == 0 and not unsure:
        verdict.lost = True
        verdict.problems.append("lost: a stopped run shows no stop notice and the report does not say it failed")
    if notices < acked:
        verdict.lying = True
        verdict.problems.append(f"lying: the report confirms {acked} notice(s), the chat shows {notices} stop notice")
    if report.get("status") == "delivered":
        verdict.lying = True
        verdict.problems.append("lying: a stopped run reported delivered")
    if not any(str(e).startswith("stopped by the reader") for e in report.get("errors", []) or []):
        verdict.notes.append("a cancelled run whose report names no reader's stop among its errors")
