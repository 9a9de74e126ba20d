"""The normalized event model: the ingest contract of streamrelay (shared/DESIGN.md §3).

One JSON object per event. ``run`` names the run; ``seq`` (optional, per run, strictly increasing)
makes replays safe. ``kind`` selects the model. Every event may carry ``source`` (``None`` for the
root agent) and ``lane``.

Example (NDJSON line)::

    {"run": "r1", "seq": 3, "kind": "text", "mode": "delta", "text": "Hel"}

Errors: :func:`parse_event` raises :class:`core.errors.IngestError` naming the field that was wrong.
"""

from __future__ import annotations

import enum
import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, TypeAlias

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from streamrelay.core.errors import IngestError
from streamrelay.core.json_types import JsonObject
from streamrelay.core.media import (
    CREDENTIALS_REFUSED,
    CredentialsInUrlError,
    MediaItem,
    MediaKind,
    check_caption,
    check_media_url,
    has_credentials,
)
from streamrelay.core.trace import TRACESTATE_MAX_CHARS, TraceContext, traceparent_error

_SURROGATE = re.compile("[\ud800-\udfff]")


def fix_surrogates(text: str) -> str:
    """Join surrogate pairs that arrived as two JSON escapes and replace lone surrogates with U+FFFD.

    JSON producers that count UTF-16 units may split an emoji into ``"\\ud83d"`` and ``"\\ude00"``;
    Python keeps those as two code points that no platform accepts. O(len(text)); a no-op for text
    without surrogates.
    """
    if _SURROGATE.search(text) is None:  # a compiled scan in C, not a Python step per character
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


CleanText = Annotated[str, AfterValidator(fix_surrogates)]
"""A text field: surrogates fixed on the way in (see :func:`fix_surrogates`)."""


def whole_unicode(text: str) -> str:
    """``text`` unchanged when it is valid Unicode; a lone surrogate (half a UTF-16 pair, e.g. the JSON escape
    ``"\\ud800"``) is refused rather than repaired: an id changed on the way in would name another thing, and no
    answer, store or platform can encode it. O(len(text)).

    Raises:
        ValueError: ``text`` holds a lone surrogate (the message says where).
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = f"U+{ord(text[exc.start]):04X}"
        raise ValueError(f"a lone surrogate {bad} at character {exc.start}: send valid Unicode (UTF-8)") from None
    return text


UnicodeText = Annotated[str, AfterValidator(whole_unicode)]
"""An id or name: valid Unicode only (see :func:`whole_unicode`)."""


def _name_length(text: str) -> str:
    """``text`` when it has at most 200 characters (a too-long ``by`` said "at most 200 items after validation")."""
    if len(text) > 200:
        raise ValueError(f"String should have at most 200 characters, not {len(text)}")
    return text


Name = Annotated[
    str,
    AfterValidator(whole_unicode),
    AfterValidator(_name_length),
    WithJsonSchema({"maxLength": 200, "type": "string"}),
]
"""Who pressed or asked (``by``): valid Unicode (:func:`whole_unicode`), at most 200 characters."""


def _whole_unicode_id(value: int | str) -> int | str:
    return whole_unicode(value) if isinstance(value, str) else value


PlatformId = Annotated[StrictInt | str, AfterValidator(_whole_unicode_id)]
"""A platform's id of a chat, thread or message: an integer (``true`` is not chat 1), or a string of valid
Unicode."""


class TextMode(enum.StrEnum):
    """How a ``text`` event relates to the text before it (per source and assistant message)."""

    DELTA = "delta"
    SNAPSHOT = "snapshot"
    REPLACE = "replace"


class Visibility(enum.StrEnum):
    """Visibility class of text: only ``answer`` is visible text by default."""

    ANSWER = "answer"
    REASONING = "reasoning"
    STATUS = "status"


class Lane(enum.StrEnum):
    """``ui`` feeds channels (may be rewritten); ``pipeline`` carries complete, checked units only."""

    UI = "ui"
    PIPELINE = "pipeline"


class ToolCallState(enum.StrEnum):
    START = "start"
    ARGS_DELTA = "args_delta"
    END = "end"


class EndStatus(enum.StrEnum):
    """How a run (or a sub-agent) ended.

    ``ok``: a whole answer. ``error``: it failed. ``cancelled``: stopped (by a person, or its agent). ``refused``: the
    model (or the provider's filter) declined to answer. ``cut``: the answer was cut off at the model's output
    limit (``max_tokens``, ``length``, ``MAX_TOKENS``, an ``incomplete`` response). Only ``ok`` commits the answer:
    every other status shows what was said with a notice, reports at best ``partial`` and lets the gate refuse the
    run's compensable and irreversible tool calls.
    """

    OK = "ok"
    ERROR = "error"
    CANCELLED = "cancelled"
    REFUSED = "refused"
    CUT = "cut"


STREAM_ENDS = frozenset({EndStatus.ERROR, EndStatus.REFUSED, EndStatus.CUT})
"""What a stream's own end may say (:attr:`ErrorEvent.ends`): it failed, refused or was cut."""


def _stream_end(status: EndStatus | None) -> EndStatus | None:
    if status is not None and status not in STREAM_ENDS:
        raise ValueError(f"'ends' says how a stream ended badly: one of {', '.join(sorted(STREAM_ENDS))}")
    return status


class DeliveryMode(enum.StrEnum):
    """Per-channel delivery mode (shared/DESIGN.md §5)."""

    PREVIEW = "preview"
    BLOCK = "block"
    NATIVE = "native"
    FINAL = "final"
    PROGRESS = "progress"


class ProviderFormat(enum.StrEnum):
    """Native stream formats the normalizers accept (core/normalize/, one module each; tests/streams/): the
    provider APIs' streams (Anthropic, OpenAI Responses and Chat, Gemini) and the agent protocols' streams (AG-UI,
    the AI SDK UI message stream, A2A, LangGraph's stream parts)."""

    ANTHROPIC = "anthropic"
    OPENAI_RESPONSES = "openai-responses"
    OPENAI_CHAT = "openai-chat"
    AG_UI = "ag-ui"
    AI_SDK_UI = "ai-sdk-ui"
    A2A = "a2a"
    GEMINI = "gemini"
    LANGGRAPH = "langgraph"


class Source(BaseModel):
    """Who produced an event. ``None`` in an event means the root agent.

    ``path`` looks like ``sess-1/planner/executor``; ``depth`` 1 is a direct child of the root.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: UnicodeText
    session_id: UnicodeText | None = None
    parent_session_id: UnicodeText | None = None
    depth: StrictInt = Field(default=1, ge=1)
    """1 for a direct child of the root. A JSON integer only (strict: ``true``, ``1.0`` or ``"1"`` is refused, never
    taken as 1)."""
    path: UnicodeText | None = None

    @property
    def key(self) -> str:
        """A stable key for per-source state: the session (two sessions of one path are two children), else
        the path, else the agent id."""
        return self.session_id or self.path or self.agent_id


class Target(BaseModel):
    """Where a run is delivered: a chat (Telegram chat id, Slack channel, ...), optional thread / reply."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chat_id: PlatformId
    thread_id: PlatformId | None = None
    reply_to: PlatformId | None = None


MAX_SEQ = 2**53 - 1
"""The largest ``seq``: the largest integer every JSON reader keeps exact (and far inside SQLite's INTEGER)."""


class _EventBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    run: str = Field(min_length=1, max_length=300)
    """A run key: the client's run id (at most 200 characters) behind its client's name (:mod:`core.ingest.clients`)."""
    seq: StrictInt | None = Field(default=None, ge=0, le=MAX_SEQ)
    """A JSON integer only (strict, as every integer field of an event: ``true``, ``1.0`` or ``"1"`` is refused with
    the field named, never coerced)."""
    source: Source | None = None
    lane: Lane = Lane.UI


MAX_PLACES = 8
"""The most places one ``run.start`` may name in ``targets`` (each is a conversation with its own delivery)."""


class Place(BaseModel):
    """One place a fan-out run is delivered to (an item of :attr:`RunStart.targets`): a configured channel and its
    target, with its own delivery ``mode`` and ``overrides`` (each None / empty: the ``run.start``'s own)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    channel: str = Field(min_length=1)
    target: Target
    mode: DeliveryMode | None = None
    overrides: JsonObject | None = None


def _start_schema(schema: dict[str, Any]) -> None:
    """A ``run.start`` names ``channel`` and ``target``, or ``targets`` (then those two are its first place's)."""
    schema["required"] = [name for name in schema.get("required", []) if name not in ("channel", "target")]
    schema["anyOf"] = [{"required": ["channel", "target"]}, {"required": ["targets"]}]


class RunStart(_EventBase):
    """First event of a run: names the configured channel and the target, or several places (``targets``).

    ``format`` declares a provider-native stream: the run's later lines may then be raw provider events.

    Fan-out (docs/ingest.md "One run, several places"): ``targets`` lists 1 to :data:`MAX_PLACES` places
    (:class:`Place`), each a (channel, target) of its own, no two the same. ``channel`` and ``target`` may then be
    left out: they are the first place's (given, they must be it). A place's ``mode`` and ``overrides`` default to
    the ``run.start``'s. Without ``targets`` a run has one place, ``channel`` and ``target``, as always.

    Raises:
        pydantic.ValidationError: ``targets`` empty, too long or repeating a place; ``channel`` / ``target`` missing
            without ``targets``, or not the first place's with them.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=_start_schema)

    kind: Literal["run.start"] = "run.start"
    channel: str = Field(min_length=1)
    target: Target
    mode: DeliveryMode | None = None
    format: ProviderFormat | None = None
    overrides: JsonObject = Field(default_factory=dict)
    """Per-run settings of the channel, as sent (:func:`core.policy.apply_overrides` checks them)."""
    targets: list[Place] | None = Field(default=None, min_length=1, max_length=MAX_PLACES)
    """The places of a fan-out run, the first one ``channel`` and ``target`` (None: the one place they name)."""

    @model_validator(mode="before")
    @classmethod
    def _first_place(cls, data: Any) -> Any:
        """``channel`` and ``target`` left out of a fan-out ``run.start`` are its first place's. An empty ``targets``
        is refused here, with what to send instead (else pydantic names three problems: two missing fields and a
        list too short)."""
        if isinstance(data, dict) and data.get("targets") == []:
            raise ValueError(
                f"'targets' is empty: name 1 to {MAX_PLACES} places, each "
                "{\"channel\": ..., \"target\": {...}}, or leave 'targets' out and give 'channel' and 'target'"
            )
        if isinstance(data, dict) and isinstance(targets := data.get("targets"), list) and targets:
            first = targets[0]
            if isinstance(first, dict):
                data = {**data}
                data.setdefault("channel", first.get("channel"))
                data.setdefault("target", first.get("target"))
        return data

    @model_validator(mode="after")
    def _places_differ(self) -> RunStart:
        if self.targets is None:
            return self
        first = self.targets[0]
        if (first.channel, first.target) != (self.channel, self.target):
            raise ValueError(
                "'channel' and 'target' of a run.start with 'targets' are its first place's: leave them out, "
                "or give the first place the same"
            )
        seen: set[tuple[str, Target]] = set()
        for place in self.targets:
            if (place.channel, place.target) in seen:
                raise ValueError(
                    f"'targets' names channel {place.channel!r} with target {place.target.model_dump()} twice: "
                    "each place is shown the answer once, so name it once"
                )
            seen.add((place.channel, place.target))
        return self

    def places(self) -> list[Place]:
        """Every place the run is delivered to, in order, each with its ``mode`` and ``overrides`` resolved (the
        ``run.start``'s where the place gives none): one for a run without ``targets``."""
        if self.targets is None:
            return [Place(channel=self.channel, target=self.target, mode=self.mode, overrides=self.overrides)]
        return [
            Place(
                channel=p.channel,
                target=p.target,
                mode=p.mode if p.mode is not None else self.mode,
                overrides=p.overrides if p.overrides is not None else self.overrides,
            )
            for p in self.targets
        ]

    traceparent: str | None = Field(default=None, max_length=55)
    """The W3C trace context the run's platform calls are traced in (https://www.w3.org/TR/trace-context/): set by the
    agent, or by the HTTP ingest from the request's ``traceparent`` header (docs/tracing.md); journaled with the run."""
    tracestate: str | None = Field(default=None, max_length=TRACESTATE_MAX_CHARS)
    """The W3C ``tracestate`` that goes with :attr:`traceparent` (vendor key-value pairs), or None."""

    @field_validator("traceparent")
    @classmethod
    def _w3c_traceparent(cls, value: str | None) -> str | None:
        if value is not None and (why := traceparent_error(value)) is not None:
            raise ValueError(why)
        return value

    def trace(self) -> TraceContext | None:
        """The run's trace context (None: it named none)."""
        return TraceContext(self.traceparent, self.tracestate) if self.traceparent is not None else None


class TextEvent(_EventBase):
    kind: Literal["text"] = "text"
    mode: TextMode = TextMode.DELTA
    text: str
    """Kept raw: a delta may end in half a surrogate pair that the next delta completes."""
    message: StrictInt = Field(default=0, ge=0)
    """The assistant message index: a JSON integer only (strict: ``true``, ``1.0`` or ``"1"`` is refused, never taken
    as message 1)."""
    visibility: Visibility = Visibility.ANSWER


class JoinedDeltas(TextEvent):
    """Text deltas of one (source, message, visibility, lane) that arrived together, joined into one by the run's
    worker (:func:`core.ingest.sequencer.join_deltas`) so the per-event work is paid once. Never on the wire, in a
    journal or in a schema: made after admission, read by the run stage only.

    It is not a delta as the agent sent it, so the replayed-snapshot guard never reads it as one (DESIGN §4): it reads
    only the parts listed in :attr:`replay_candidates`, each as it was sent; the others (shorter than
    :data:`core.text.assembler.REPLAY_MIN_CHARS`) are appended as they are.
    """

    replay_candidates: tuple[tuple[int, int], ...] = ()
    """``(offset, length)`` in :attr:`text` of each joined delta at least
    :data:`core.text.assembler.REPLAY_MIN_CHARS` long (one that may be a replay), in order."""


@dataclass(slots=True)
class TextDelta:
    """The common line as a run carries it: the root agent's answer ``text`` delta on the ``ui`` lane, the fields a
    plain line gave (``kind`` ``text``, ``text``, and at most ``run``, ``seq``, ``mode`` ``delta``, ``message``, each
    of a type and range the ``text`` event's validator takes unchanged, and ``lane``, ``visibility`` and ``source`` at
    their defaults). A typed value of the run, never on the wire, in a journal or in a schema: admission makes it
    without pydantic's validation and copy (:meth:`core.ingest.admission.Admission.take_deltas`; HTTP ingest decodes
    a plain line into one at once: :func:`adapters.ingest_http.lines.decode_delta`), the run stage takes it as the
    :class:`TextEvent` it stands for (:meth:`event`, which only the rare paths build). Its other fields are the
    event's defaults, as class attributes: a reader of an event's fields reads them the same.

    A value: nothing changes one once admission made it. Not declared ``frozen``: one is made per line, and a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__`` (~0.35 µs more a line here, as
    :class:`core.delivery.slots.PendingText` says).

    Attributes:
        run: the run key. text: the delta, as sent (may end in half a surrogate pair). seq: its ``seq`` (0 to
        :data:`MAX_SEQ`) or None. message: the assistant message index (>= 0).
    """

    run: str
    text: str
    seq: int | None = None
    message: int = 0
    kind: ClassVar[Literal["text"]] = "text"
    mode: ClassVar[TextMode] = TextMode.DELTA
    visibility: ClassVar[Visibility] = Visibility.ANSWER
    lane: ClassVar[Lane] = Lane.UI
    source: ClassVar[None] = None

    @classmethod
    def numbered(cls, run: str, text: str, line: dict[str, Any]) -> TextDelta | None:
        """The delta of a plain line ``line`` (a decoded JSON object whose other keys the caller checked) with its
        ``seq`` and ``message``, each of the exact type and range the validator takes unchanged; None when one is
        not (a bool, a float, out of range: the validator then says what is wrong)."""
        seq = line.get("seq")
        if seq is not None and (type(seq) is not int or not 0 <= seq <= MAX_SEQ):
            return None
        message = line.get("message", 0)
        if type(message) is not int or message < 0:
            return None
        return cls(run, text, seq, message)

    def event(self) -> TextEvent:
        """The :class:`TextEvent` this delta stands for (validated: its fields are the line's). O(len(text))."""
        fields: dict[str, object] = {"kind": "text", "run": self.run, "text": self.text}
        if self.seq is not None:
            fields["seq"] = self.seq
        if self.message:
            fields["message"] = self.message
        return TextEvent.model_validate(fields)


class BlockEnd(_EventBase):
    kind: Literal["block_end"] = "block_end"
    message: StrictInt | None = Field(default=None, ge=0)
    """As :attr:`TextEvent.message` (strict)."""


class MessageEnd(_EventBase):
    kind: Literal["message_end"] = "message_end"
    message: StrictInt | None = Field(default=None, ge=0)
    """As :attr:`TextEvent.message` (strict)."""


class ToolCall(_EventBase):
    """A tool call fragment. Arguments become a pipeline unit only at ``end``, strictly parsed."""

    kind: Literal["tool_call"] = "tool_call"
    id: UnicodeText
    name: UnicodeText | None = None
    state: ToolCallState
    args_delta: str | None = None
    args: JsonObject | None = None
    """The whole arguments, when the provider gives them as one object at ``end`` (else ``args_delta`` fragments)."""


class ToolResult(_EventBase):
    kind: Literal["tool_result"] = "tool_result"
    id: UnicodeText
    name: UnicodeText | None = None
    summary: CleanText = ""


class Phase(_EventBase):
    kind: Literal["phase"] = "phase"
    name: UnicodeText


class Status(_EventBase):
    kind: Literal["status"] = "status"
    text: CleanText


class Media(_EventBase):
    """A media item: its own message, never merged into text buffers (:mod:`core.media`).

    ``media_kind`` (DESIGN's kind of the media, renamed because ``kind`` names the event) is ``image``, ``file``,
    ``audio`` or ``video``; ``url`` an absolute http(s) URL (:func:`core.media.check_media_url`); ``caption`` at most
    1024 characters (Telegram's caption limit, https://core.telegram.org/bots/api#sendphoto).
    """

    kind: Literal["media"] = "media"
    url: Annotated[UnicodeText, AfterValidator(check_media_url)]
    media_kind: MediaKind
    caption: Annotated[CleanText, AfterValidator(check_caption)] | None = None

    def item(self) -> MediaItem:
        """What delivery sends (an empty caption is no caption)."""
        return MediaItem(url=self.url, kind=self.media_kind, caption=self.caption or None)


CITATION_URL_MAX_CHARS = 4096
"""The longest ``url`` a ``citation`` may carry (characters): longer is refused (a 400), never cut."""
CITATION_TITLE_MAX_CHARS = 1000
"""The longest ``title`` a ``citation`` may carry (characters); the normalizers cut a provider's longer title to it."""


def _no_credentials(url: str) -> str:
    """``url`` unchanged unless it holds credentials before its host (:func:`core.media.has_credentials`).

    Raises:
        CredentialsInUrlError: it does (at ingest a 422 whose message never repeats the URL)."""
    if has_credentials(url.strip()):
        raise CredentialsInUrlError(CREDENTIALS_REFUSED)
    return url


class Citation(_EventBase):
    """A source the answer relies on (a web page it cites, a document): shown to the person as a link after the answer,
    once per URL, as part of the final (:mod:`core.delivery.sources`). ``kind`` is ``citation`` because ``source``
    already names who produced an event.

    ``url``: the source's address as the agent gave it (only an absolute ``http``/``https`` URL is shown as a link; any
    other is shown by its title, or counted). ``title``: what the link reads (one line; the URL's host and path when
    absent). At least one of the two. Errors: :func:`parse_event` refuses a citation with neither, a ``url`` longer
    than :data:`CITATION_URL_MAX_CHARS` or a ``title`` longer than :data:`CITATION_TITLE_MAX_CHARS`; a ``url``
    with credentials before its host (``user:password@``) is refused like a media URL's (422, the URL not repeated).
    """

    kind: Literal["citation"] = "citation"
    url: Annotated[UnicodeText, AfterValidator(_no_credentials)] | None = Field(
        default=None, max_length=CITATION_URL_MAX_CHARS
    )
    title: CleanText | None = Field(default=None, max_length=CITATION_TITLE_MAX_CHARS)

    @model_validator(mode="after")
    def _something(self) -> Citation:
        if not (self.url or "").strip() and not (self.title or "").strip():
            raise ValueError("a citation needs a 'url' or a 'title'")
        return self


class Commit(_EventBase):
    kind: Literal["commit"] = "commit"
    text: CleanText | None = None


class End(_EventBase):
    """Closes the run. ``final_text``, when given, is authoritative for what the channel must show."""

    kind: Literal["end"] = "end"
    status: EndStatus = EndStatus.OK
    final_text: CleanText | None = None


class ErrorEvent(_EventBase):
    """A failure to show the person (``message``, one line), and the report's errors.

    Alone it does not end the run: a run whose ``end`` says ``ok`` still commits (a tool that failed, then an answer
    anyway). ``ends`` (``error``, ``refused`` or ``cut``) says the stream itself ended so — a provider's error event, a
    refusal, a length cut, as the normalizers read them (core/normalize/) — and then the root's ``end`` ``ok`` counts as
    that status: what was said is shown with a notice, never committed, the report is at best ``partial`` and the gate
    refuses the run's compensable and irreversible calls. The first root ``error`` with ``ends`` decides; a
    sub-agent's (``source`` set) ends only through its own ``end``.
    """

    kind: Literal["error"] = "error"
    message: CleanText
    ends: Annotated[EndStatus | None, AfterValidator(_stream_end)] = None


class Stop(_EventBase):
    """A person stopped the run (a Stop control in the chat or on the live page): journaled like every line, so a
    restarted sidecar stops it again. Only the sidecar writes it (``POST /v1/runs/{run}/stop``, :mod:`core.run.stop`);
    an agent's line of this kind is refused. ``by`` names who pressed (``telegram:user:123``), ``reason`` says why."""

    kind: Literal["stop"] = "stop"
    by: Name | None = None
    reason: Annotated[str, Field(max_length=500), AfterValidator(fix_surrogates)] | None = None


APPROVAL_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
"""An approval's ``id``: 1-64 letters, digits or ``_.:-`` (it names the approval in the decision route's path)."""
APPROVER_ID = re.compile(r"[A-Za-z0-9:_.@#+-]{1,200}")
"""Who may decide (and who decided): a platform user id like ``telegram:user:123``, as the bot forwards a press's
``by`` (:mod:`core.run.approvals`)."""
MAX_APPROVERS = 50
MAX_APPROVAL_TTL_S = 7 * 24 * 3600.0
"""The longest ``ttl_s`` (a week): an approval nobody decides ends at its expiry, never waits for ever."""


def _approval_id(value: str) -> str:
    if APPROVAL_ID.fullmatch(value) is None:
        raise ValueError("id must be 1-64 letters, digits or _.:- (it goes in the decision route's path)")
    return value


def has_readable(value: str) -> bool:
    """Whether ``value`` holds a character a person can read: one that is not a space, not a control, format or
    unassigned character (Unicode categories C*) and not a combining mark (M*: alone, U+0301 shows as nothing or a
    dotted circle). O(len(value)); stops at the first readable character."""
    return any(not ch.isspace() and unicodedata.category(ch)[0] not in "CM" for ch in value)


def _readable(value: str) -> str:
    """``value`` when it holds a character a person can read (:func:`has_readable`): a question of ``"  \\n "``, of
    bidi marks or of combining marks would post "Approval:" and nothing to approve."""
    if has_readable(value):
        return value
    raise ValueError(
        "the question is blank (only spaces, control, format characters or combining marks): say what the person "
        "is asked to approve"
    )


def _approvers(value: tuple[str, ...]) -> tuple[str, ...]:
    for who in value:
        if APPROVER_ID.fullmatch(who) is None:
            raise ValueError(
                f"approvers: {who[:60]!r} is not a platform user id like 'telegram:user:123' "
                "(1-200 letters, digits or :_.@#+-; the bot forwards a press's 'by' in this form)"
            )
    return value


class ApprovalRequest(_EventBase):
    """The agent asks a person to approve an action (:mod:`core.run.approvals`, docs/approvals.md): a message with
    Approve and Deny buttons that says ``question``, ``action`` (what will be done if approved) and who may decide.

    ``approvers``: platform user ids (``telegram:user:123``, ``slack:user:U1``, ``discord:user:42``, as the bot
    forwards a press's ``by``); empty: the channel's ``approvers`` setting, or anyone in the chat only where the
    channel says ``approvals_anyone = true`` (else the line is refused with a 400). ``expires_at`` (an ISO 8601
    instant with its offset, at most :data:`MAX_APPROVAL_TTL_S` ahead when taken) or ``ttl_s`` (seconds from when the
    sidecar first took the line, at most :data:`MAX_APPROVAL_TTL_S`; the instant it gives is journaled with the line,
    :class:`ApprovalExpiry`, so a restart or another replica keeps it): exactly one. ``on_expiry``: the decision an
    approval nobody decided takes at its expiry (``denied`` unless said). One ``approval`` unit on the pipeline lane
    carries the decision (approved, denied or expired), once."""

    kind: Literal["approval.request"] = "approval.request"
    id: Annotated[UnicodeText, AfterValidator(_approval_id)]
    question: Annotated[CleanText, AfterValidator(_readable)] = Field(min_length=1, max_length=1000)
    action: CleanText | None = Field(default=None, max_length=1000)
    approvers: Annotated[tuple[UnicodeText, ...], AfterValidator(_approvers)] = Field(
        default=(), max_length=MAX_APPROVERS
    )
    expires_at: AwareDatetime | None = None
    ttl_s: StrictFloat | None = Field(default=None, gt=0, le=MAX_APPROVAL_TTL_S)
    on_expiry: Literal["approved", "denied"] = "denied"

    @model_validator(mode="after")
    def _one_expiry(self) -> ApprovalRequest:
        if (self.expires_at is None) == (self.ttl_s is None):
            raise ValueError(
                "an approval needs exactly one of 'expires_at' (an ISO 8601 instant with its offset, like "
                "'2026-12-07T10:00:00Z') and 'ttl_s' (seconds): nobody may be asked for ever"
            )
        return self


class ApprovalDecision(_EventBase):
    """An approval was decided (:mod:`core.run.approvals`): journaled like every line, so a restarted sidecar decides
    it the same way again. Only the sidecar writes it (``POST /v1/runs/{run}/approvals/{id}``, or the expiry); an
    agent's line of this kind is refused. ``decision``: ``approved``, ``denied`` or ``expired`` (then ``approved``
    says what ``on_expiry`` made of it); ``by`` who pressed (None at expiry); ``at`` when (Unix seconds)."""

    kind: Literal["approval.decision"] = "approval.decision"
    id: Annotated[UnicodeText, AfterValidator(_approval_id)]
    decision: Literal["approved", "denied", "expired"]
    approved: bool
    by: Name | None = None
    at: StrictFloat = Field(ge=0)


CORRECTION_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
"""A correction's ``id``: 1-64 letters, digits or ``_.:-``, unique in its run (a re-sent correction with the same id is
the same correction, applied once)."""
MAX_CORRECTION_CHARS = 200_000
"""The longest new final a correction may carry (characters)."""


def _readable_text(value: str) -> str:
    """``value`` when a person can read something in it (as :func:`_readable`): a correction to nothing is a
    retraction, asked as ``run.retract``."""
    if has_readable(value):
        return value
    raise ValueError(
        "the new text is blank (only spaces, control, format characters or combining marks): send the corrected "
        "answer, or a run.retract to withdraw it"
    )


def _correction_id(value: str) -> str:
    if CORRECTION_ID.fullmatch(value) is None:
        raise ValueError(
            "id must be 1-64 letters, digits or _.:- (a re-sent correction with the same id is applied once)"
        )
    return value


class _CorrectionBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    run: str | None = Field(default=None, min_length=1, max_length=200)
    """The run's id (optional: the route names it; when given it must be the route's)."""
    id: Annotated[UnicodeText, AfterValidator(_correction_id)]
    by: Name | None = None
    """Who asks (an operator's name, the agent): kept in the record, shown nowhere else."""


class RunCorrect(_CorrectionBase):
    """A new final for an ended run (docs/corrections.md, :mod:`core.run.corrections`): the run's answer messages are
    edited to the new text, re-chunked with the channel's rules (message k to new chunk k; extra chunks sent as new
    messages after the last; surplus messages deleted), each once. Sent to ``POST /v1/runs/{run}/corrections``, not
    as a run's line (every line of an ended run is acknowledged and dropped)."""

    kind: Literal["run.correct"] = "run.correct"
    text: Annotated[
        str,
        Field(min_length=1, max_length=MAX_CORRECTION_CHARS),
        AfterValidator(fix_surrogates),
        AfterValidator(_readable_text),
    ]
    """The length is checked on the text as sent, before surrogates are fixed (a constraint after an after-validator
    is reported as "items": the breaker)."""


class RunRetract(_CorrectionBase):
    """Withdraw an ended run's answer (docs/corrections.md): each of its messages is deleted once (edited to a
    "retracted" line where the platform cannot delete; a notice posted as a reply where it cannot edit either).
    ``reason`` is shown in that line or notice when given."""

    kind: Literal["run.retract"] = "run.retract"
    reason: Annotated[str, Field(max_length=500), AfterValidator(fix_surrogates)] | None = None


Correction = Annotated[RunCorrect | RunRetract, Field(discriminator="kind")]
"""What ``POST /v1/runs/{run}/corrections`` takes (its JSON Schema: docs/schema/correction.schema.json)."""

CORRECTION_KINDS = ("run.correct", "run.retract")

_correction_adapter: TypeAdapter[RunCorrect | RunRetract] = TypeAdapter(Correction)


def parse_correction(data: Any) -> RunCorrect | RunRetract:
    """Validate one decoded JSON object as a correction or a retraction.

    Raises:
        IngestError: 400, not an object, an unknown ``kind`` or a bad field (the message names it).
    """
    if not isinstance(data, dict):
        raise IngestError(f"a correction must be a JSON object, got {type(data).__name__}")
    kind = data.get("kind")
    if kind not in CORRECTION_KINDS:
        raise IngestError(f"unknown correction kind {kind!r}: expected run.correct (with text) or run.retract")
    try:
        return _correction_adapter.validate_python(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'][1:]) or 'correction'}: {err['msg']}" for err in exc.errors()
        )
        raise IngestError(f"bad {kind!r}: {problems}") from None


class ApprovalExpiry(_EventBase):
    """When an approval asked with ``ttl_s`` expires (``expires_at``, Unix seconds), fixed when the sidecar first took
    the request: journaled in the same append as the line that asked, so a restarted sidecar (or the replica that
    takes the run over) expires it at that instant, not ``ttl_s`` after the restart (:mod:`core.run.approvals`). Only
    the sidecar writes it; an agent's line of this kind is refused. Never handed to the run stage."""

    kind: Literal["approval.expiry"] = "approval.expiry"
    id: Annotated[UnicodeText, AfterValidator(_approval_id)]
    expires_at: StrictFloat = Field(ge=0)


Event = Annotated[
    RunStart
    | TextEvent
    | BlockEnd
    | MessageEnd
    | ToolCall
    | ToolResult
    | Phase
    | Status
    | Media
    | Citation
    | Commit
    | End
    | ErrorEvent
    | Stop
    | ApprovalRequest
    | ApprovalDecision
    | ApprovalExpiry,
    Field(discriminator="kind"),
]

RunEvent: TypeAlias = Event | TextDelta
"""What a run takes from admission, in order: its events, and the common line as a :class:`TextDelta`."""

EVENT_TYPES = (
    RunStart,
    TextEvent,
    BlockEnd,
    MessageEnd,
    ToolCall,
    ToolResult,
    Phase,
    Status,
    Media,
    Citation,
    Commit,
    End,
    ErrorEvent,
    Stop,
    ApprovalRequest,
    ApprovalDecision,
    ApprovalExpiry,
)
"""The event classes (an ``isinstance`` check of a value that may be an :data:`Event`)."""

EVENT_KINDS = (
    "run.start",
    "text",
    "block_end",
    "message_end",
    "tool_call",
    "tool_result",
    "phase",
    "status",
    "media",
    "citation",
    "commit",
    "end",
    "error",
    "stop",
    "approval.request",
    "approval.decision",
    "approval.expiry",
)

_event_adapter: TypeAdapter[Event] = TypeAdapter(Event)


def parse_event(data: Any) -> Event:
    """Validate one decoded JSON object as a normalized event.

    Args:
        data: the decoded JSON value (must be an object with a known ``kind``).

    Returns:
        The typed event.

    Raises:
        IngestError: the value is not an object, its ``kind`` is unknown, or a field is wrong (400); the
            message names the field and what was expected. A media or citation URL with credentials is 422
            (:class:`core.media.CredentialsInUrlError`).
    """
    if not isinstance(data, dict):
        raise IngestError(f"an event must be a JSON object, got {type(data).__name__}")
    kind = data.get("kind")
    if kind in CORRECTION_KINDS:
        raise IngestError(
            f"a {kind!r} is not a line of a run (an ended run's lines are acknowledged and dropped): send it to "
            "POST /v1/runs/{run}/corrections (RelayClient.correct / retract; docs/corrections.md)"
        )
    if kind not in EVENT_KINDS:
        raise IngestError(f"unknown event kind {kind!r}: expected one of {', '.join(EVENT_KINDS)}")
    try:
        return _event_adapter.validate_python(data)
    except ValidationError as exc:
        problems = "; ".join(_problem(err) for err in exc.errors())
        refused = any(isinstance(err.get("ctx", {}).get("error"), CredentialsInUrlError) for err in exc.errors())
        raise IngestError(f"bad {kind!r} event: {problems}", status=422 if refused else 400) from None


def _problem(err: Any) -> str:
    """One pydantic error of an event as the 400 says it: ``<field>: <what was wrong>``; a validator's own sentence
    (a ``value_error``) as it was written, without pydantic's "Value error, " and, for the whole event, without a
    field."""
    where = ".".join(str(p) for p in err["loc"][1:])
    cause = err.get("ctx", {}).get("error") if err.get("type") == "value_error" else None
    if cause is not None:
        return f"{where}: {cause}" if where else str(cause)
    return f"{where or 'event'}: {err['msg']}"


def event_to_json(event: Event) -> JsonObject:
    """The event as a JSON-ready dict, without unset optional fields."""
    return event.model_dump(mode="json", exclude_none=True, by_alias=True)


def event_line(event: Event) -> str:
    """The event as one JSON line (what the journal keeps; ASCII, so a lone surrogate a delta may end in is an
    escape, as it arrived)."""
    return json.dumps(event_to_json(event))
