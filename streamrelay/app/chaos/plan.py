"""A campaign's plan, drawn from its seed before anything starts: the runs (platform, delivery mode, chat, answer,
pacing, requests), where the sidecar is killed, which platform faults are scripted, and what each agent does after
a kill. The same ``--runs`` and ``--seed`` give the same plan; only timing varies between two campaigns."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamrelay.adapters.registry import REGISTRY
from streamrelay.app.chaos.answers import Answer, Media, Recording, pick_answer, pick_media, run_lines
from streamrelay.app.chaos.approvals import DECIDED_TTL_S, ApprovalPlan, add_approvals

PLATFORMS = tuple(name for name, platform in REGISTRY.items() if platform.dry_run is not None)
"""The platforms a campaign can run on: every registered one with a mock (:mod:`adapters.registry`)."""
MODES = ("preview", "block", "native")
NATIVE_PLATFORMS = tuple(name for name in PLATFORMS if (dry := REGISTRY[name].dry_run) and dry.native_chat is not None)
"""The campaign's platforms that stream natively (``delivery = "native"``: :attr:`DryRunFacts.native_chat`)."""
NATIVE_STREAM_MS = (1500.0, 6000.0)
"""How long a native run streams (its pace: this over its lines, unless a stop planned it slower): past the channel's
``throttle_ms``, so it opens a stream and appends to it (at a few ms a line most answers end before the first
tick and go as one message)."""
NATIVE_SHARE = 1 / 3
"""With ``native`` among other modes, about this share of the runs on a native platform is turned ``native`` (by a
generator of its own, after every other draw: the seed's other runs stay what they were)."""
BACKENDS = ("sqlite", "redis")

CREATE = {name: dry.create_method for name, p in REGISTRY.items() if (dry := p.dry_run) is not None}
"""Each platform's method that creates a message (faults and send latency are scripted on it)."""
EDIT = {name: dry.edit_method for name, p in REGISTRY.items() if (dry := p.dry_run) is not None}
"""Each platform's method that edits a message."""
MEDIA_SENDS = {
    name: tuple(sorted(set(dry.media_methods.values())))
    for name, p in REGISTRY.items()
    if (dry := p.dry_run) is not None
}
"""Each platform's methods that send a media item where they are not its create method (Telegram's sendPhoto,
sendDocument, ...: :attr:`adapters.platform.DryRunFacts.media_methods`; Slack and Discord send media with their
create method, so its faults hit media sends too)."""

MEDIA_SHARE = 0.25
"""About this share of runs carries one or two ``media`` events between paragraphs of its answer."""
STOP_SHARE = 1 / 6
"""About this share of runs is stopped by its reader (``POST /v1/runs/{run}/stop``) at a planned point."""
STOPPED_STREAM_MS = (1500.0, 4000.0)
"""How long a run stopped mid-stream takes to stream (its pace: this over its lines): long enough that the stop
lands while it streams."""
STOP_AFTER_END_SHARE = 0.2
FANOUT_SHARE = 0.6
"""The share of a one-sidecar campaign's plain runs (no media, stop, approval nor correction) also delivered to a
second place on another platform (a fan-out ``run.start``, docs/ingest.md "One run, several places"), judged there
as a run of its own."""
FANOUT_CHAT_OFFSET = 50_000
"""A fan-out run's second place is that platform's chat of ``index + FANOUT_CHAT_OFFSET``: no run's own chat."""
CORRECTION_SHARE = 0.2
"""About this share of the runs without media or a stop is corrected after its report says delivered: its agent
posts a new final (another slice of a recording: longer or shorter, so messages are edited, sent and deleted)."""
CORRECTION_KILL_SHARE = 0.4
"""Of the corrections, this share has the sidecar killed -9 while it is applied (0-600 ms after it is posted)."""
"""Of the stops, this share is posted right after the run's ``end`` was accepted (a stop racing the end)."""

KILL_KINDS = (("after_end", 0.35), ("in_flight", 0.2), ("in_flight_stored", 0.2), ("mid_stream", 0.25))
"""Where a planned kill -9 lands: right after a run's ``end`` was accepted (during finalization); while sends are
in flight, either held before the platform stores them (``in_flight``: the mock delays the next creates and edits)
or stored with their answer held (``in_flight_stored``: the next create and edit are ``timeout_after_commit``);
or at a point of a run's stream."""

FAULT_KINDS = (
    ("429 storm", 0.16),
    ("5xx before commit", 0.1),
    ("5xx after commit", 0.14),
    ("5xx edit", 0.06),
    ("timeout before commit", 0.1),
    ("timeout after commit", 0.14),
    ("timeout edit", 0.06),
    ("reset", 0.06),
    ("reset after commit", 0.06),
    ("outage", 0.12),
)
"""Platform faults scripted on the mocks (``POST /_mock/script``) and how often each is drawn."""

OUTAGE_REPLIES: tuple[dict[str, Any] | str, ...] = (
    {"status": 502},
    {"status": 503},
    "timeout_before_commit",
    "timeout_after_commit",
    "reset",
)


@dataclass(frozen=True)
class Options:
    """What ``streamrelay chaos`` was asked for.

    Attributes:
        runs: how many runs.
        seed: the plan's seed.
        platforms: the platforms runs are spread over.
        modes: the delivery modes runs are spread over (run.start ``mode``).
        exclusive_bot: Telegram's channel says the bot token is the sidecar's alone (uncertain sends are then
            settled by an id probe).
        concurrency: how many agents stream at once.
        long: outages of minutes (and a run idle timeout above them) instead of seconds.
        out: the transcript folder (None: a new temporary folder).
        runs_per_kill: one planned kill per this many runs (at least two kills).
        runs_per_fault: one planned fault per this many runs (at least three).
        idle_timeout_s: the sidecar's ``run_idle_timeout_s`` (None: 20 s, or 300 s with ``long``).
        send_timeout_ms: every channel's ``send_timeout_ms``.
        backend: ``sqlite`` (one sidecar on a journal and ledger file) or ``redis`` (``replicas`` processes on one
            redis-server the campaign starts).
        replicas: how many sidecar processes (``redis`` only; ``sqlite`` has one).
        lease_ttl_s: ``redis``: the replicas' ``lease_ttl_s`` (a killed replica's partitions move after at most
            4/3 of it: short, so a kill costs seconds).
        partitions: ``redis``: the replicas' ``partitions``.
        failovers: ``redis``: how many primary failovers (kill -9 of the Redis primary; the sentinels promote its
            replica). Above 0 the campaign's Redis is a primary, a replica and three sentinels
            (:mod:`app.chaos.sentinels`), and the replicas find the primary through the sentinels.
        agent_back_s: how long an agent that re-sends after a kill waits once the sidecar answers again (seconds):
            above the idle timeout, every run resumed after a kill is closed before its agent is back, and the agent's
            later lines are refused (409) while the ones the run took are acknowledged.
        fresh_processes: start every sidecar (and each restart after a kill) as a new interpreter, as an operator's
            supervisor does, instead of forking it from a zygote that has imported the command and the platforms'
            SDKs (:mod:`app.preloaded`: the same code from the command's arguments on, and about 9 CPU-seconds less
            per start with the six platforms).
        approval_ttl_s: the ``ttl_s`` of an approval the approver approves or denies (seconds; an expiry plan's is
            2-5 s whatever this is): a short one bounds how long a run whose agent vanished after asking waits
            (:data:`app.chaos.approvals.DECIDED_TTL_S`).
    """

    runs: int
    seed: int
    platforms: tuple[str, ...] = PLATFORMS
    modes: tuple[str, ...] = MODES
    exclusive_bot: bool = True
    concurrency: int = 12
    long: bool = False
    out: Path | None = None
    runs_per_kill: int = 12
    runs_per_fault: int = 4
    idle_timeout_s: float | None = None
    send_timeout_ms: int = 1500
    backend: str = "sqlite"
    replicas: int = 1
    lease_ttl_s: float = 3.0
    partitions: int = 16
    failovers: int = 0
    agent_back_s: float = 0.0
    fresh_processes: bool = False
    approval_ttl_s: float = DECIDED_TTL_S

    @property
    def replicated(self) -> bool:
        """The sidecar runs as replicas on Redis."""
        return self.backend == "redis"

    @property
    def idle_s(self) -> float:
        if self.idle_timeout_s is not None:
            return self.idle_timeout_s
        return 300.0 if self.long else 20.0


@dataclass(frozen=True)
class KillPlan:
    """A kill -9 of the sidecar triggered by a run: ``kind`` (:data:`KILL_KINDS`), at the fraction ``at`` of the
    run's lines (``after_end``: once its ``end`` is accepted), ``delay_ms`` after the trigger."""

    kind: str
    at: float
    delay_ms: int
    latency_ms: int = 0
    """``in_flight``: how long the mock holds each of the next creates and edits before it stores them."""

    def script(self, platform: str, mode: str = "preview") -> dict[str, Any] | None:
        """The control API body that puts sends in flight before the kill (None: nothing to script): on the run's
        create, edit and media methods, and a native run's stream methods (:func:`methods_of`)."""
        methods = methods_of(platform, mode)  # Matrix: one
        if self.kind == "in_flight":
            held = [self.latency_ms] * 3
            return {"latency_ms": {m: held for m in methods}}
        if self.kind == "in_flight_stored":
            return {"faults": [{"method": m, "nth": 1, "reply": "timeout_after_commit"} for m in methods]}
        return None


@dataclass(frozen=True)
class FaultPlan:
    """A platform fault scripted on the run's platform mock when the run reaches the fraction ``at`` of its
    lines: ``kind`` (:data:`FAULT_KINDS`) and the control API body."""

    kind: str
    at: float
    body: dict[str, Any]


@dataclass(frozen=True)
class StopPlan:
    """A reader's stop of the run (``POST /v1/runs/{run}/stop``, as the bot that owns the platform's updates
    forwards a Stop press): at the fraction ``at`` of the run's lines, or right after its ``end`` was accepted
    (``after_end``: racing it), ``delay_ms`` after that point."""

    at: float
    delay_ms: int
    after_end: bool = False


@dataclass(frozen=True)
class CorrectionPlan:
    """A correction of the run once it is delivered (``POST /v1/runs/{run}/corrections``, docs/corrections.md):
    ``id``, the new final ``text``, and a kill -9 ``kill_ms`` after it is posted (None: none)."""

    id: str
    text: str
    kill_ms: int | None = None


@dataclass
class RunPlan:
    """One run of the campaign."""

    index: int
    run: str
    platform: str
    mode: str
    chat_id: int | str
    answer: Answer
    lines: list[dict[str, Any]]
    batches: tuple[int, ...]
    """How many lines each request carries (their sum is ``len(lines)``)."""
    pace_ms: float
    resend: tuple[bool, ...]
    """After the k-th kill it sees, the agent re-sends its whole run from seq 0 (True) or never comes back."""
    kill: KillPlan | None = None
    fault: FaultPlan | None = None
    media: tuple[Media, ...] = ()
    """The answer's media items (their ``media`` lines are among ``lines``)."""
    stop: StopPlan | None = None
    approval: ApprovalPlan | None = None
    """An approval the run asks (:mod:`app.chaos.approvals`): its line is among ``lines``."""
    correction: CorrectionPlan | None = None
    places: tuple[tuple[str, int | str], ...] = ()
    """A fan-out run's other places, ``(platform, chat_id)`` each (its channel is named after its platform)."""
    failover: float | None = None
    """``redis`` with failovers: the fraction of the run's lines at which the Redis primary is killed (a
    ``primary failover`` fault)."""
    notes: list[str] = field(default_factory=list)

    @property
    def combo(self) -> str:
        return f"{self.platform}/{self.mode}"


def chat_id(platform: str, index: int) -> int | str:
    """The run's own conversation (:attr:`adapters.platform.DryRunFacts.chat`: e.g. a Telegram private chat for even
    runs, a supergroup for odd ones; a Slack channel id, a Discord channel snowflake)."""
    dry = REGISTRY[platform].dry_run
    assert dry is not None  # PLATFORMS holds only platforms with a mock
    return dry.chat(index)


def _batches(rng: random.Random, n: int) -> tuple[int, ...]:
    if rng.random() < 0.25:
        return (n,)  # one request for the whole run
    out: list[int] = []
    left = n
    while left > 0:
        take = min(left, rng.randint(3, 60))
        out.append(take)
        left -= take
    return tuple(out)


def _weighted(rng: random.Random, table: tuple[tuple[str, float], ...]) -> str:
    return rng.choices([k for k, _ in table], weights=[w for _, w in table])[0]


def fault_body(rng: random.Random, kind: str, platform: str, long: bool) -> dict[str, Any]:
    """The ``POST /_mock/script`` body of one fault of ``kind`` on ``platform``."""
    create, edit = CREATE[platform], EDIT[platform]
    status = rng.choice((500, 502, 503))
    one = {"method": create, "nth": rng.randint(1, 3)}
    if kind == "429 storm":
        retry = rng.choice((1, 1, 2, 3))
        count = rng.randint(3, 8)
        faults = [
            {"method": m, "nth": k, "reply": {"status": 429, "retry_after_s": retry}}
            for m in dict.fromkeys((create, edit))  # once where one method creates and edits (Matrix: send)
            for k in range(1, count + 1)
        ]
        return {"faults": faults}
    if kind == "5xx before commit":
        return {"faults": [{**one, "reply": {"status": status}}]}
    if kind == "5xx after commit":
        return {"faults": [{**one, "reply": {"status": status}, "after_commit": True}]}
    if kind == "5xx edit":
        return {"faults": [{"method": edit, "nth": 1, "reply": {"status": status}, "after_commit": rng.random() < 0.5}]}
    if kind == "timeout before commit":
        return {"faults": [{**one, "reply": "timeout_before_commit"}]}
    if kind == "timeout after commit":
        return {"faults": [{**one, "reply": "timeout_after_commit"}]}
    if kind == "timeout edit":
        return {"faults": [{"method": edit, "nth": 1, "reply": "timeout_after_commit"}]}
    if kind == "reset":
        return {"faults": [{**one, "reply": "reset"}]}
    if kind == "reset after commit":
        return {"faults": [{**one, "reply": "reset", "after_commit": True}]}
    seconds = rng.randint(60, 150) if long else rng.randint(2, 8)
    outage: dict[str, Any] = {"seconds": seconds, "reply": rng.choice(OUTAGE_REPLIES)}
    if rng.random() < 0.5:
        outage["methods"] = list(dict.fromkeys((create, edit)))
    return {"outage": outage}


def make_plan(options: Options, recordings: list[Recording]) -> list[RunPlan]:
    """The campaign's runs, kills and faults, drawn from ``options.seed``. ``native`` alone: runs on the native
    platforms only; ``native`` among other modes: the runs are drawn over the others, then a share of those on native
    platforms turned native (:func:`_add_native`), so a seed's other runs stay what they were without it."""
    rng = random.Random(options.seed)
    combos = _combos(options)
    assigned = [combos[i % len(combos)] for i in range(options.runs)]
    rng.shuffle(assigned)
    plans: list[RunPlan] = []
    for index, (platform, mode) in enumerate(assigned):
        answer = pick_answer(rng, recordings)
        run = f"chaos-{options.seed}-{index:05d}"
        chat = chat_id(platform, index)
        lines = run_lines(run, platform, chat, mode, answer)
        plans.append(
            RunPlan(
                index=index,
                run=run,
                platform=platform,
                mode=mode,
                chat_id=chat,
                answer=answer,
                lines=lines,
                batches=_batches(rng, len(lines)),
                pace_ms=rng.uniform(1.0, 6.0),
                resend=tuple(rng.random() < 0.65 for _ in range(8)),
            )
        )
    kills = max(2, round(options.runs / options.runs_per_kill))
    # not the very first runs: the campaign is warming up, nothing is in flight yet
    candidates = list(range(min(2, options.runs - 1), options.runs))
    for index in rng.sample(candidates, min(kills, len(candidates))):
        kind = _weighted(rng, KILL_KINDS)
        delay = rng.randint(0, 400) if kind == "after_end" else rng.randint(100, 900)
        latency = rng.randint(600, 1200) if kind == "in_flight" else 0
        plans[index].kill = KillPlan(kind, rng.uniform(0.1, 0.9), delay, latency)
    faults = max(3, round(options.runs / options.runs_per_fault))
    for index in rng.sample(range(options.runs), min(faults, options.runs)):
        kind = _weighted(rng, FAULT_KINDS)
        platform = plans[index].platform
        plans[index].fault = FaultPlan(kind, rng.uniform(0.0, 0.9), fault_body(rng, kind, platform, options.long))
    for plan in plans:  # drawn last: the same seed keeps the runs, kills and faults it drew before media and stops
        _add_media_and_stop(rng, plan)
    # its own generator: the plans above stay what the seed drew
    add_approvals(options.seed, plans, options.approval_ttl_s)
    draw = random.Random(f"correction-{options.seed}")  # its own: the runs, kills, faults, media, stops stay the seed's
    for plan in plans:  # replicas too: any replica takes the correction, the run's owner applies it
        if draw.random() < CORRECTION_SHARE and not plan.media and plan.stop is None and plan.approval is None:
            text = pick_answer(draw, recordings).text
            kill_ms = draw.randint(0, 600) if draw.random() < CORRECTION_KILL_SHARE else None
            plan.correction = CorrectionPlan(f"fix-{plan.index}", text, kill_ms)
    if not options.replicated and len(options.platforms) > 1:  # its own generator: the plans above stay the seed's
        _add_fanout(options, plans)
    if options.replicated and options.failovers > 0:  # its own generator: the plans without failovers stay the same
        draw = random.Random(f"failover-{options.seed}")
        candidates = list(range(min(2, options.runs - 1), options.runs))
        for index in sorted(draw.sample(candidates, min(options.failovers, len(candidates)))):
            plans[index].failover = draw.uniform(0.1, 0.9)
    if "native" in options.modes:  # its own generator, drawn last: every other draw stays the seed's
        _add_native(options, plans)
    return plans


def _combos(options: Options) -> list[tuple[str, str]]:
    """The (platform, mode) pairs runs are spread over: ``native`` alone, the native platforms'; else every platform's
    other modes (``native`` comes after, :func:`_add_native`).

    Raises:
        ValueError: ``native`` alone and no platform of the campaign streams natively.
    """
    platforms, modes = options.platforms, tuple(m for m in options.modes if m != "native") or options.modes
    if modes == ("native",):
        platforms = tuple(p for p in platforms if p in NATIVE_PLATFORMS)
        if not platforms:
            raise ValueError(f"native: none of {', '.join(options.platforms)} streams natively ({NATIVE_PLATFORMS})")
    return [(p, m) for p in platforms for m in modes]


def _add_native(options: Options, plans: list[RunPlan]) -> None:
    """Seeded apart (``native-<seed>``): with ``native`` alone every run, else about :data:`NATIVE_SHARE` of the
    runs on a native platform, streams natively into a conversation the platform streams in
    (:attr:`DryRunFacts.native_chat`): its ``run.start`` asks ``mode`` ``native`` (a run may ask any mode: the
    channel stays as configured), it streams over 1.5-6 s (:data:`NATIVE_STREAM_MS`), and its fault is aimed at the
    native stream's methods."""
    draw = random.Random(f"native-{options.seed}")
    alone = tuple(m for m in options.modes if m != "native") == ()
    for plan in plans:
        if plan.platform not in NATIVE_PLATFORMS or not (alone or draw.random() < NATIVE_SHARE):
            continue
        dry = REGISTRY[plan.platform].dry_run
        assert dry is not None and dry.native_chat is not None
        plan.mode, plan.chat_id = "native", dry.native_chat(plan.index)
        plan.pace_ms = max(plan.pace_ms, draw.uniform(*NATIVE_STREAM_MS) / len(plan.lines))
        start = plan.lines[0]
        start["mode"], start["target"] = "native", {"chat_id": plan.chat_id}
        if "targets" in start:
            start["targets"] = [{**start["targets"][0], "target": {"chat_id": plan.chat_id}}, *start["targets"][1:]]
        if plan.fault is not None:
            plan.fault = FaultPlan(plan.fault.kind, plan.fault.at, aim_at_native(draw, plan.fault.body, plan.platform))


def methods_of(platform: str, mode: str) -> tuple[str, ...]:
    """The methods a run of ``mode`` on ``platform`` creates and edits its messages with (an in-flight kill holds
    them): its create and edit methods, its media sends, and a native run's stream methods."""
    dry = REGISTRY[platform].dry_run
    native = dry.native_methods if dry is not None and mode == "native" else ()
    return tuple(dict.fromkeys((CREATE[platform], EDIT[platform], *MEDIA_SENDS[platform], *native)))


def aim_at_native(rng: random.Random, body: dict[str, Any], platform: str) -> dict[str, Any]:
    """``body`` (a fault drawn for a create or an edit) aimed at the native stream's methods: a create fault at the
    stream's start or finish, an edit fault at its update (Teams: every streaming activity is a
    sendToConversation; Telegram: the finish is the sendMessage). An outage limited to some methods covers the
    stream's too."""
    dry = REGISTRY[platform].dry_run
    assert dry is not None and dry.native_methods
    native = dry.native_methods
    starts, update = (native[0], native[-1]), native[1] if len(native) > 2 else native[0]
    if "outage" in body:
        methods = body["outage"].get("methods")
        return (
            body if not methods else {"outage": {**body["outage"], "methods": list(dict.fromkeys((*methods, *native)))}}
        )
    aimed: list[dict[str, Any]] = []
    taken: set[tuple[str, int]] = set()
    start = rng.choice(starts)  # one method for the whole fault: a 429 storm hits one
    for fault in body["faults"]:
        method = start if fault["method"] == CREATE[platform] else update
        if fault["method"] not in (CREATE[platform], EDIT[platform]):
            method = fault["method"]
        if (method, fault["nth"]) not in taken:
            taken.add((method, fault["nth"]))
            aimed.append({**fault, "method": method})
    return {"faults": aimed}


def _add_fanout(options: Options, plans: list[RunPlan]) -> None:
    """Seeded apart (``fanout-<seed>``): a share of the plain runs (:data:`FANOUT_SHARE`) also go to a second place,
    another platform's chat no run has (:data:`FANOUT_CHAT_OFFSET`); their ``run.start`` gets ``targets``."""
    draw = random.Random(f"fanout-{options.seed}")
    for plan in plans:
        plain = not plan.media and plan.stop is None and plan.approval is None and plan.correction is None
        if draw.random() < FANOUT_SHARE and plain:
            other = draw.choice([p for p in options.platforms if p != plan.platform])
            plan.places = ((other, chat_id(other, plan.index + FANOUT_CHAT_OFFSET)),)
            plan.lines = run_lines(plan.run, plan.platform, plan.chat_id, plan.mode, plan.answer, (), plan.places)


def _add_media_and_stop(rng: random.Random, plan: RunPlan) -> None:
    """Seeded: media items between paragraphs (:data:`MEDIA_SHARE`; the run's lines and last batch grow by
    them, and a fault of the run may aim at a media send) and a reader's stop (:data:`STOP_SHARE`)."""
    if rng.random() < MEDIA_SHARE:
        plan.media = pick_media(rng, plan.run, plan.answer, rng.choice((1, 1, 2)))
        plan.lines = run_lines(plan.run, plan.platform, plan.chat_id, plan.mode, plan.answer, plan.media)
        plan.batches = (*plan.batches[:-1], plan.batches[-1] + len(plan.media))
        if plan.fault is not None and plan.media:
            body = aim_at_media(rng, plan.fault.body, plan.platform, plan.media)
            # half the time scripted as the run reaches a media line: its next creates are the text before the
            # media item and the media send (Slack and Discord send media with their create method)
            at = plan.fault.at
            if rng.random() < 0.5:
                at = rng.choice([i for i, line in enumerate(plan.lines) if line["kind"] == "media"]) / len(plan.lines)
            plan.fault = FaultPlan(plan.fault.kind, at, body)
    if rng.random() < STOP_SHARE:
        after_end = rng.random() < STOP_AFTER_END_SHARE
        plan.stop = StopPlan(rng.uniform(0.1, 0.9), rng.randint(0, 300 if after_end else 60), after_end)
        if not after_end:  # a reader stops an answer still streaming: at a few ms a line most runs end first
            plan.pace_ms = rng.uniform(*STOPPED_STREAM_MS) / len(plan.lines)


def aim_at_media(rng: random.Random, body: dict[str, Any], platform: str, media: tuple[Media, ...]) -> dict[str, Any]:
    """``body`` (a fault of a run with media) aimed at media sends too where they have their own method
    (Telegram): a one-call create fault moves to a media item's method half of the time, a 429 storm covers the
    media methods, an outage limited to some methods adds them. Unchanged where media go through the create
    method (Slack, Discord: their create faults already hit media sends)."""
    dry = REGISTRY[platform].dry_run
    assert dry is not None
    sends = sorted({dry.media_method(m.kind) for m in media} - {CREATE[platform]})
    if not sends:
        return body
    if "outage" in body:
        methods = body["outage"].get("methods")
        return body if not methods else {"outage": {**body["outage"], "methods": [*methods, *sends]}}
    faults = body["faults"]
    if len(faults) > 1:  # a 429 storm: the same replies on the media methods
        storm = [f for f in faults if f["method"] == CREATE[platform]]
        return {"faults": [*faults, *({**f, "method": s} for s in sends for f in storm)]}
    one = faults[0]
    if one["method"] == CREATE[platform] and rng.random() < 0.5:
        return {"faults": [{**one, "method": rng.choice(sends), "nth": 1}]}
    return body
