"""The judge: what a run's chat shows against its known answer and its delivery report.

Texts are compared whitespace-insensitively, with fence marker lines (```lang, ~~~) left out on both sides (the
chunker closes a code fence it cuts and reopens it in the next message: markers added, nothing of the answer).
Notices (the idle and failure notices the sidecar shows) are told apart from the answer's messages.

- **lost**: the chat does not show, in order, every character of what the run must show: the whole answer once
  its ``end`` was acknowledged; else (its agent gone after a kill) at least the lines the sidecar acknowledged.
- **doubled**: the chat shows text of the answer more than once (a duplicate message, a repeated part, a chat
  longer than the answer) or anything that is not a prefix of it.
- **uncertain reported**: the report counts uncertain parts.
- **lying**: the report says ``delivered`` while the chat differs from the answer; or the chat shows a duplicate
  or a message the report does not list (an orphan) beyond what the report counts uncertain; or the report lists
  message ids the chat does not show.
- **unfinished**: no report, or one that never said done.
- **misplaced**, and media items and stopped runs: :mod:`app.chaos.judge_parts` (a media message is told apart from
  the text by its caption and left out of the text compared).
- a ``native`` run (:func:`judge_streams`): once its report says done, no native stream of its chat is left open
  (a Slack stream never stopped, a Teams stream with no final, a Telegram draft still shown): **unfinished**, and a
  lie when the report says ``delivered``. The streamed messages themselves are in the chat and judged as above.
- a run its agent corrected after it was delivered: :mod:`app.chaos.judge_corrections` (the chat against the new
  final and the correction's own record).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamrelay.adapters.discord.markdown import REWRITTEN
from streamrelay.adapters.registry import REGISTRY
from streamrelay.app.chaos.agent import AgentRecord
from streamrelay.app.chaos.answers import text_of
from streamrelay.app.chaos.approvals import ApprovalVerdict
from streamrelay.app.chaos.judge_corrections import correction_of, judge_corrected
from streamrelay.app.chaos.judge_parts import CANCELLED, judge_media, judge_stop, judge_vanished, split_media
from streamrelay.app.chaos.plan import CREATE, MEDIA_SENDS, RunPlan
from streamrelay.core.run.stage import FAILURE_NOTICE, IDLE_NOTICE, STOPPED_NOTICE
from streamrelay.core.text.chunk_checks import content_key

NOTICES = (IDLE_NOTICE, FAILURE_NOTICE, STOPPED_NOTICE)
MIN_REPEAT = 16
"""A message's text (normalized) at least this long that shows more often than in the answer is a duplicate."""


def norm(text: str, platform: str = "") -> str:
    """``text`` without fence marker lines, block quote markers at line starts and whitespace: what a chunk
    cut may not change (core.text.chunk_checks.content_key, with the project's one fence reader). On Discord also
    without the characters its Markdown rewrite moves (:data:`adapters.discord.markdown.REWRITTEN`)."""
    key = content_key(text)
    return REWRITTEN.sub("", key) if platform == "discord" else key


def is_notice(text: str) -> bool:
    stripped = text.strip()
    return any(stripped.startswith(n) for n in NOTICES)


def is_subsequence(needle: str, haystack: str) -> bool:
    """Every character of ``needle`` appears in ``haystack``, in order."""
    it = iter(haystack)
    return all(ch in it for ch in needle)


def divergence(expected: str, shown: str) -> int:
    """The first index where ``shown`` differs from ``expected`` (both normalized)."""
    for i, (a, b) in enumerate(zip(expected, shown, strict=False)):
        if a != b:
            return i
    return min(len(expected), len(shown))


@dataclass
class Verdict:
    """One run's judgement."""

    run: str
    platform: str
    mode: str
    lost: bool = False
    doubled: bool = False
    uncertain: bool = False
    lying: bool = False
    unfinished: bool = False
    misplaced: bool = False
    """A media item shown out of its place between the texts."""
    stopped: bool = False
    """The report ends ``cancelled``: judged as a reader's stop (a prefix, the notice once)."""
    media_planned: int = 0
    media_shown: int = 0
    doubled_allowed: bool = False
    """A double reported uncertain where the platform cannot settle a send (Telegram without an exclusive bot;
    :attr:`adapters.platform.DryRunFacts.unsettleable`: WhatsApp): allowed (not a lie)."""
    approval: ApprovalVerdict = field(default_factory=ApprovalVerdict)
    """The run's approval (:mod:`app.chaos.approvals`), when it asked one."""
    expected: str = "full"
    """``full``: the whole answer; ``prefix``: its agent left after a kill, what it acknowledged at least."""
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def bad(self) -> bool:
        doubled = self.doubled and not self.doubled_allowed
        return self.lost or self.lying or self.unfinished or self.misplaced or doubled or self.approval.bad

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "approval": {**self.approval.__dict__, "bad": self.approval.bad}, "bad": self.bad}


def judge(
    plan: RunPlan,
    record: AgentRecord,
    chat: list[dict[str, Any]],
    report: dict[str, Any] | None,
    *,
    exclusive_bot: bool,
    stop: dict[str, Any] | None = None,
    calls: list[dict[str, Any]] | None = None,
    status_webhooks: bool = True,
    streams: list[dict[str, Any]] | None = None,
) -> Verdict:
    """Judge one run by what its chat shows (``[{"message_id", "text"}]`` from the mock) and its final report;
    ``stop``: the reader's stop posted for it (:attr:`app.chaos.triggers.Chaos.stops`: ``sent``, the lines its
    agent had sent when the stop was answered); ``calls``: the mock's calls for the run's chat (a message created
    there and gone from the chat is lost); ``streams``: the mock's native streams of the chat (``GET /_mock/state``
    ``streams``: ``[{"message_id", "state", "text"}]``); ``status_webhooks``: the sidecar received the platforms'
    status webhooks (a campaign points its mocks at them), so a platform that settles by them is judged as
    settling."""
    verdict = Verdict(plan.run, plan.platform, plan.mode, media_planned=len(plan.media))
    full = plan.answer.text
    stopped = report is not None and report.get("end_status") == CANCELLED
    if record.end_confirmed:
        low = high = full
    else:
        verdict.expected = "prefix"
        low = text_of(plan.lines, record.confirmed)
        high = text_of(plan.lines, record.sent)
    p = plan.platform
    taken = correction_of(plan, record, report)
    if taken is not None and report is not None and report.get("done"):  # the chat must show the new final alone
        judge_corrected(
            verdict,
            plan,
            chat,
            taken,
            lambda text: norm(text, p),
            lambda shown, want: _judge_text(verdict, chat, shown, want, want, p),
        )
        judge_streams(verdict, streams or [], report)
        return verdict
    answer_messages = [m for m in chat if not is_notice(str(m.get("text", "")))]
    texts, _ = split_media(plan, answer_messages)
    notices = len(chat) - len(answer_messages)
    shown = "".join(norm(str(m.get("text", "")), p) for m in texts)
    if stopped and report is not None:
        verdict.expected = "stopped"
        upto = min(record.sent, int((stop or {}).get("sent", record.sent)))
        judge_stop(verdict, chat, report, shown, norm(text_of(plan.lines, upto), p))
        if record.confirmed > upto:  # one sidecar answers them 409; replicas take them (tests/redis xfail)
            verdict.notes.append(f"lines {upto}-{record.confirmed - 1}, sent after the stop was answered, got a 200")
    else:
        sent = range(record.confirmed, max(record.confirmed, record.sent) + 1)
        prefixes = {norm(text_of(plan.lines, j), p) for j in sent}
        prefixes.add(norm(low, p))
        under_way = report is not None and not report.get("done") and norm(full, p).startswith(shown)
        if shown not in prefixes and not under_way:  # a delivery under way shows a prefix: unfinished, judged below
            listed = _listed_only(texts, report, p)
            if listed is not None and listed in prefixes:
                verdict.doubled = True  # allowed or a lie: _judge_report (the report counts the copy uncertain)
                verdict.problems.append(
                    "doubled: the chat shows a copy of a part the report counts uncertain and does not list (a "
                    "duplicate it said was possible); without it the chat shows what the run may show"
                )
            else:
                _judge_text(verdict, texts, shown, norm(low, p), norm(high, p), p)
    must_show = 0 if stopped else len(plan.lines) if record.end_confirmed else record.confirmed
    judge_media(verdict, plan, answer_messages, report, must_show, lambda text: norm(text, p))
    judge_vanished(verdict, chat, calls or [], {CREATE[p], *MEDIA_SENDS[p]})
    if record.end_confirmed and notices and not stopped:
        verdict.notes.append(f"{notices} notice(s) shown though the run ended ok")
    if report is None and not chat and record.confirmed == 0 and record.gone is not None:
        verdict.notes.append("never accepted: the agent left before the sidecar acknowledged a line (no report)")
        return verdict
    if report is None or not report.get("done"):
        verdict.unfinished = True
        verdict.problems.append(
            "unfinished: no report" if report is None else f"unfinished: report still {report.get('status')!r}"
        )
        if report is None and chat:
            verdict.lying = True
            verdict.problems.append(f"lying: no report for a run whose chat shows {len(chat)} message(s)")
        # A report not done claims nothing final: it is a snapshot of a delivery still under way, read at another
        # instant than the chat (calls made in between show in one and not the other). Unfinished is the finding.
        return verdict
    media_whole = verdict.media_shown == len(plan.media) and not verdict.doubled
    whole = shown == norm(full, p) and not notices and media_whole
    _judge_report(verdict, plan, chat, report, whole, exclusive_bot, status_webhooks, streams)
    judge_streams(verdict, streams or [], report)
    return verdict


OPEN_STREAMS = {"open": "a Slack stream never stopped", "streaming": "a Teams stream with no final", "draft": "a draft"}
"""Native stream states (``GET /_mock/state`` ``streams``) a person still sees as streaming."""


def judge_streams(verdict: Verdict, streams: list[dict[str, Any]], report: dict[str, Any]) -> None:
    """A run whose report says done leaves no native stream open: a Slack ``chat.startStream`` message never
    stopped (shown as still streaming until it expires), a Teams stream with no ``final`` activity (Teams ends it
    with an error after two minutes), a Telegram draft still shown (beside the answer, until it lapses): unfinished,
    and a lie when the report says ``delivered``. A stream whose start was never answered (no handle to finish or
    delete it with) that the report does not list and counts among its uncertain parts is reported truly: a note."""
    left = [s for s in streams if s.get("state") in OPEN_STREAMS]
    listed = {str(i) for i in report.get("message_ids", [])}
    unlisted = [s for s in left if s.get("state") != "draft" and str(s["message_id"]) not in listed]
    if unlisted and len(unlisted) == len(left) and len(unlisted) <= int(report.get("uncertain", 0) or 0):
        ids = [s["message_id"] for s in unlisted]
        verdict.notes.append(f"stream(s) {ids} left open, not listed, counted uncertain by the report")
        return
    if not left:
        return
    verdict.unfinished = True
    what = "; ".join(
        f"{OPEN_STREAMS[str(s['state'])]} ({s['message_id']}, {len(str(s.get('text', '')))} chars)" for s in left
    )
    verdict.problems.append(f"unfinished: the report says done while the chat still streams: {what}")
    if report.get("status") == "delivered":
        verdict.lying = True
        verdict.problems.append("lying: the report says delivered while a native stream is left open")


def _judge_text(
    verdict: Verdict, messages: list[dict[str, Any]], shown: str, low: str, high: str, platform: str
) -> None:
    """The chat shows no prefix the run may show (``low``: at least; ``high``: at most, normalized): lost, doubled
    or both. Text shown in order with a hole is lost (what is shown after the hole proves the hole's text was
    journaled); text that is not an in-order piece of the answer is doubled when it is longer than the answer or
    repeats a message, else lost (out of order)."""
    in_order = is_subsequence(shown, high)
    repeats = [] if in_order else _repeats(messages, high, platform)
    verdict.doubled = not in_order and (len(shown) > len(high) or bool(repeats))
    verdict.lost = in_order or not is_subsequence(low, shown) or not verdict.doubled
    at = divergence(low if in_order or verdict.lost else high, shown)
    if verdict.lost:
        why = "in order, with a hole" if in_order else ("out of order" if not verdict.doubled else "and repeats")
        verdict.problems.append(
            f"lost: the chat shows {len(shown)} characters ({why}) where the answer has {len(low)} (whitespace and"
            f" fence markers aside); first difference at character {at}: answer {low[at : at + 40]!r}, chat"
            f" {shown[at : at + 40]!r}"
        )
    if verdict.doubled:
        why = f"repeated: {repeats[:2]}" if repeats else "longer than the answer"
        verdict.problems.append(
            f"doubled: the chat shows {len(shown)} characters for {len(high)} of answer, {why}; first difference at"
            f" character {at}: answer {high[at : at + 40]!r}, chat {shown[at : at + 40]!r}"
        )


def _listed_only(texts: list[dict[str, Any]], report: dict[str, Any] | None, platform: str) -> str | None:
    """What the chat shows without the messages the report does not list, when it counts at least as many uncertain
    parts (each may be a create the platform could not settle, shown beside the part sent again); None otherwise.
    A copy too short for the repeat check (``MIN_REPEAT``) would else read as text out of order."""
    if report is None:
        return None
    ids = {str(i) for i in report.get("message_ids", [])}
    unlisted = [m for m in texts if str(m.get("message_id")) not in ids]
    if not unlisted or len(unlisted) > int(report.get("uncertain", 0) or 0):
        return None
    return "".join(norm(str(m.get("text", "")), platform) for m in texts if m not in unlisted)


def _judge_report(
    verdict: Verdict,
    plan: RunPlan,
    chat: list[dict[str, Any]],
    report: dict[str, Any],
    whole: bool,
    exclusive_bot: bool,
    status_webhooks: bool = True,
    streams: list[dict[str, Any]] | None = None,
) -> None:
    uncertain = int(report.get("uncertain", 0) or 0)
    verdict.uncertain = uncertain > 0
    status = report.get("status")
    if status == "delivered" and not whole:
        verdict.lying = True
        verdict.problems.append("lying: the report says delivered while the chat differs from the answer")
    if verdict.doubled:
        if uncertain == 0:
            verdict.lying = True
            verdict.problems.append("lying: the chat shows a duplicate the report does not count as uncertain")
        elif (plan.platform == "telegram" and not exclusive_bot) or _unsettleable(plan.platform, status_webhooks):
            verdict.doubled_allowed = True
        elif plan.mode == "native" and _stream_copies(chat, report, streams):
            verdict.doubled_allowed = True  # a stream start never answered: no handle to finish or delete it with
            verdict.notes.append("the copy is a native stream whose start was never answered, reported uncertain")
    chat_ids = [str(m.get("message_id")) for m in chat]
    report_ids = [str(i) for i in report.get("message_ids", [])]
    orphans = [i for i in chat_ids if i not in report_ids]
    if len(orphans) > uncertain:
        verdict.lying = True
        verdict.problems.append(
            f"lying: the chat shows message(s) {orphans} the report does not list, beyond its {uncertain} uncertain"
        )
    strangers = [i for i in report_ids if i not in chat_ids]
    if strangers:
        verdict.lying = True
        verdict.problems.append(f"lying: the report lists message id(s) {strangers} the chat does not show")
    if whole and status != "delivered":
        verdict.notes.append(f"the chat shows the whole answer, the report says {status!r} (uncertain {uncertain})")


def _stream_copies(chat: list[dict[str, Any]], report: dict[str, Any], streams: list[dict[str, Any]] | None) -> bool:
    """Every message the chat shows that the report does not list is a native stream (``streams``), and the report
    counts at least as many uncertain parts: copies it said were possible."""
    listed = {str(i) for i in report.get("message_ids", [])}
    unlisted = [str(m.get("message_id")) for m in chat if str(m.get("message_id")) not in listed]
    ids = {str(s.get("message_id")) for s in streams or []}
    return bool(unlisted) and set(unlisted) <= ids and len(unlisted) <= int(report.get("uncertain", 0) or 0)


def _repeats(messages: list[dict[str, Any]], answer: str, platform: str) -> list[str]:
    """Message texts (normalized, long enough) shown more often than the answer holds them."""
    shown = "".join(norm(str(m.get("text", "")), platform) for m in messages)
    out: list[str] = []
    for m in messages:
        text = norm(str(m.get("text", "")), platform)
        if len(text) >= MIN_REPEAT and shown.count(text) > max(1, answer.count(text)):
            out.append(text[:40])
    return out


def _unsettleable(platform: str, status_webhooks: bool = True) -> bool:
    """The platform cannot tell whether an uncertain send arrived: its registration says so, or it settles by status
    webhooks the sidecar does not receive (``status_webhooks`` False: WhatsApp then cannot settle)."""
    dry = REGISTRY[platform].dry_run
    return dry is not None and (dry.unsettleable or (dry.status_webhook is not None and not status_webhooks))
