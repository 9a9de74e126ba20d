"""The action gate: may a complete tool call run now, after the run's commit point, or never?

Every tool in the action catalog carries an :class:`ActionClass`. The gate looks at one pipeline unit
(core/lanes/pipeline.py) and at where its run stands, and answers with a :class:`GateDecision`::

    class            running, not committed      committed                 ended without a commit
    idempotent       run                         run                       run
    reversible       run                         run                       run
    compensable      wait (names compensation)   run                       refuse
    irreversible     wait                        run                       refuse
    not in catalog   wait (as irreversible)      run                       refuse

A call a person had to approve first (the channel's ``approve_actions``, :mod:`core.lanes.hold`) reaches the lane only
once approved, its unit naming the ``approval``: it runs, whatever the class and the commit point (a person said so).
Before the decision :func:`ask_gate` answers ``wait`` naming the approval; denied or expired, ``refuse`` with the
``approval`` unit.

A unit that is not a complete ``tool_call`` (a ``tool_call.malformed`` unit: arguments cut off, not
JSON, or not matching the tool's schema) is refused, whatever the run's state. "Ended without commit"
means the run's ``end`` came with status ``error``, ``cancelled``, ``refused`` or ``cut`` (also an ``ok`` end after
the stream's own error, refusal or length cut, which counts as that: :attr:`core.events.ErrorEvent.ends`), or with
``ok`` but the caller did not see the commit point pass (an ``ok`` end that commits is passed as ``committed=True``).

The catalog does not check arguments against JSON Schemas: that needs a library the core does not
import. ``config/actions.py`` builds an :data:`core.lanes.pipeline.ArgsValidator` next to the catalog, and the
pipeline lane turns a call it rejects into a ``tool_call.malformed`` unit, which the gate refuses.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from streamrelay.core.contracts.units import (
    ApprovalUnit,
    CommitUnit,
    MalformedToolCallUnit,
    PipelineUnit,
    RunEndUnit,
    ToolCallUnit,
)
from streamrelay.core.lanes.pipeline import PipelineLane

TOOL_CALL = "tool_call"
MALFORMED = "tool_call.malformed"


class ActionClass(enum.StrEnum):
    """What running a tool does to the world, and so when it may run.

    ``idempotent``: running it twice equals running it once, and it changes nothing anyone else sees
    (a read, a search). ``reversible``: it changes something, but the agent itself can undo it and no one
    else is affected meanwhile (write to a draft, a scratch file). ``compensable``: it has effects on
    others that a named compensating action can offset afterwards (a refund offsets a charge; the Saga
    pattern, https://microservices.io/patterns/data/saga.html). ``irreversible``: it cannot be undone
    (send an email, pay out, delete for good).
    """

    IDEMPOTENT = "idempotent"
    REVERSIBLE = "reversible"
    COMPENSABLE = "compensable"
    IRREVERSIBLE = "irreversible"

    @property
    def safe_before_commit(self) -> bool:
        """True for the classes that may run before the run's commit point."""
        return self in (ActionClass.IDEMPOTENT, ActionClass.REVERSIBLE)


@dataclass(frozen=True)
class Action:
    """One tool of the action catalog.

    Attributes:
        name: the tool's name as the model calls it (``search``).
        cls: its :class:`ActionClass`.
        compensation: for a ``compensable`` action, the catalog action that offsets it (``refund_card``
            for ``charge_card``); None for the other classes.
        description: a short text for people.
    """

    name: str
    cls: ActionClass
    compensation: str | None = None
    description: str = ""


class Verdict(enum.StrEnum):
    """The gate's answer.

    ``run``: the call may run now. ``wait``: hold it until the run passes its commit point, then ask
    again. ``refuse``: never run it (not a complete call, arguments invalid, or the run ended without a
    commit).
    """

    RUN = "run"
    WAIT = "wait"
    REFUSE = "refuse"


@dataclass(frozen=True)
class GateDecision:
    """What the gate decided about one call, and why.

    Attributes:
        verdict: run, wait or refuse.
        reason: one sentence for people and logs; names the tool.
        action_class: the class the decision used (``irreversible`` for a tool not in the catalog);
            None when the unit was not a complete call.
        compensation: the compensating action of a ``compensable`` tool, else None.
    """

    verdict: Verdict
    reason: str
    action_class: ActionClass | None = None
    compensation: str | None = None

    def to_json(self) -> dict[str, str | None]:
        """``{"verdict": "wait", "reason": "...", "class": "compensable", "compensation": "refund_card"}``;
        ``class`` and ``compensation`` may be null."""
        return {
            "verdict": str(self.verdict),
            "reason": self.reason,
            "class": str(self.action_class) if self.action_class is not None else None,
            "compensation": self.compensation,
        }


class ActionCatalog:
    """The tools an agent may call, each with its :class:`ActionClass`; decides calls with :meth:`decide`.

    Args:
        actions: the catalog's actions; names must be unique.

    Raises:
        ValueError: a name repeats, a ``compensable`` action names no compensation, another class names
            one, or a compensation is not another action of the catalog (``streamrelay/config/actions.py`` reports
            these as ConfigError first).
    """

    def __init__(self, actions: Iterable[Action] = ()) -> None:
        table: dict[str, Action] = {}
        for action in actions:
            if action.name in table:
                raise ValueError(f"action {action.name!r} is in the catalog twice")
            table[action.name] = action
        for action in table.values():
            if action.cls is ActionClass.COMPENSABLE and not action.compensation:
                raise ValueError(f"{action.name} is compensable: name its compensation")
            if action.compensation is None:
                continue
            if action.cls is not ActionClass.COMPENSABLE:
                raise ValueError(f"{action.name} is {action.cls}: only a compensable action names a compensation")
            if action.compensation not in table or action.compensation == action.name:
                raise ValueError(f"{action.name}'s compensation {action.compensation!r} is not another catalog action")
        self._actions = table

    @property
    def actions(self) -> Mapping[str, Action]:
        """The catalog by tool name (read-only)."""
        return MappingProxyType(self._actions)

    def get(self, name: str) -> Action | None:
        """The action named ``name``, or None if it is not in the catalog."""
        return self._actions.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._actions

    def __iter__(self) -> Iterator[Action]:
        return iter(self._actions.values())

    def __len__(self) -> int:
        return len(self._actions)

    def decide(self, unit: PipelineUnit, *, committed: bool, ended: str | None) -> GateDecision:
        """May this pipeline unit run now? The policy table is in this module's docstring.

        Args:
            unit: a pipeline unit (a :class:`~core.contracts.units.ToolCallUnit` may run; any other is refused).
            committed: the run has passed its commit point (an ``ok`` end that committed counts).
            ended: the run's end status (``ok``, ``error``, ``cancelled``, ``refused``, ``cut``), or None while it runs.

        Returns:
            The decision; never raises on a strange unit (it is refused).
        """
        if not isinstance(unit, ToolCallUnit):
            return _not_a_call(unit)
        if not unit.name:
            return GateDecision(Verdict.REFUSE, f"tool call {unit.id} has no tool name")
        name = unit.name
        action = self._actions.get(name)
        if action is None:
            cls, compensation = ActionClass.IRREVERSIBLE, None
            what = f"{name} is not in the action catalog: treated as irreversible"
        else:
            cls, compensation = action.cls, action.compensation
            what = f"{name} is {cls}"
        if unit.approval is not None:
            return GateDecision(Verdict.RUN, f"{what}; a person approved it ({unit.approval})", cls, compensation)
        if committed:
            return GateDecision(Verdict.RUN, f"{what}; the run passed its commit point", cls, compensation)
        if cls.safe_before_commit:
            return GateDecision(Verdict.RUN, f"{what}: it may run before the commit point", cls, compensation)
        if ended is not None:
            reason = f"{what}; the run ended ({ended}) without passing its commit point"
            return GateDecision(Verdict.REFUSE, reason, cls, compensation)
        if cls is ActionClass.COMPENSABLE:
            reason = f"{what} (compensation: {compensation}); it waits for the run's commit point"
            return GateDecision(Verdict.WAIT, reason, cls, compensation)
        return GateDecision(Verdict.WAIT, f"{what}; it waits for the run's commit point", cls, compensation)


def _not_a_call(unit: PipelineUnit) -> GateDecision:
    """The refusal of a unit that is not a complete tool call."""
    if isinstance(unit, MalformedToolCallUnit):
        call = f"{unit.name or 'unnamed tool'} (call {unit.id})"
        return GateDecision(Verdict.REFUSE, f"{call} is a {MALFORMED} unit: {unit.error or 'no error given'}")
    return GateDecision(Verdict.REFUSE, f"a {unit.kind!r} unit is not a tool call")


class UnknownCallError(LookupError):
    """No complete tool call with that id is on the run's pipeline lane."""


class AmbiguousCallError(UnknownCallError):
    """Several agents of the run made a call with that id, and nothing says which is meant."""


Call = ToolCallUnit | MalformedToolCallUnit
"""A tool call's pipeline unit: complete, or malformed."""


def find_call(lane: PipelineLane, call_id: str, source_key: str | None = None) -> Call | None:
    """The pipeline unit of tool call ``call_id`` (complete or malformed), or None while none is there; the
    latest when one agent used the id again.

    ``source_key`` (a :attr:`core.events.Source.key`, ``"root"`` for the root agent) picks one when two
    agents of the run used the same call id.

    Raises:
        AmbiguousCallError: two agents' calls have this id and no ``source_key`` says which.
    """
    found = [u for u in lane.units if isinstance(u, ToolCallUnit | MalformedToolCallUnit) and u.id == call_id]
    if source_key is not None:
        found = [u for u in found if _source_key(u) == source_key]
    keys = sorted({_source_key(u) for u in found})
    if len(keys) > 1:
        raise AmbiguousCallError(
            f"tool call {call_id!r} was made by several agents ({', '.join(keys)}): say which with source"
        )
    return found[-1] if found else None  # an agent that numbers its calls per turn reuses ids: the latest


def _source_key(unit: Call) -> str:
    return unit.source.key if unit.source is not None else "root"


def lane_state(lane: PipelineLane) -> tuple[bool, str | None]:
    """``(committed, ended)`` of a run, read from its pipeline lane (its ``commit`` and ``run.end`` units)."""
    committed = any(isinstance(u, CommitUnit) for u in lane.units)
    last = lane.units[-1] if lane.units else None
    ended = str(last.status) if isinstance(last, RunEndUnit) else None
    return committed, ended


def _held_call(lane: PipelineLane, call_id: str, source_key: str | None) -> str | None:
    """The id of the approval a person has yet to decide for call ``call_id`` (:mod:`core.lanes.hold`), or None."""
    for approval_id, (held, key) in lane.held.items():
        if held == call_id and (source_key is None or key == source_key):
            return approval_id
    return None


def _refused_hold(lane: PipelineLane, call_id: str) -> ApprovalUnit | None:
    """The ``approval`` unit that refused call ``call_id`` (denied, or expired as denied), or None (the latest)."""
    found = [u for u in lane.units if isinstance(u, ApprovalUnit) and u.call == call_id and not u.approved]
    return found[-1] if found else None


def _wait_for_person(call_id: str, approval_id: str, *, ended: bool) -> GateDecision:
    """``wait``: the call is held until a person decides approval ``approval_id``; ``refuse`` once the run ``ended``
    undecided (nobody decides it any more)."""
    if ended:
        return GateDecision(
            Verdict.REFUSE, f"tool call {call_id}: the run ended before approval {approval_id} was decided"
        )
    return GateDecision(Verdict.WAIT, f"tool call {call_id} waits for a person's approval ({approval_id})")


def _refused_by_person(unit: ApprovalUnit) -> GateDecision:
    """``refuse``: the approval holding the call was denied, or expired as denied."""
    how = f"denied by {unit.by}" if unit.decision == "denied" and unit.by else unit.decision
    return GateDecision(Verdict.REFUSE, f"tool call {unit.call} was not approved: approval {unit.id} {how}")


async def ask_gate(
    catalog: ActionCatalog, lane: PipelineLane, call_id: str, *, source_key: str | None = None, wait_s: float = 0.0
) -> tuple[GateDecision, PipelineUnit | None]:
    """The gate's decision on tool call ``call_id`` of the run whose pipeline lane is ``lane``, and the pipeline unit
    it decided on: the call's; a held call's refusing ``approval`` unit; None while a person has yet to decide
    (:mod:`core.lanes.hold`: ``wait``, naming the approval).

    With ``wait_s`` > 0, waits up to that many seconds (real time: this is a client's request) while the
    call is not on the lane yet or the verdict is ``wait``, and answers as soon as either changes (the commit,
    a person's decision or the run's end arrives).

    Raises:
        UnknownCallError: no unit of that call is on the lane nor held (after waiting), or the id is ambiguous.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, wait_s)
    while True:
        seen = len(lane.units)
        unit = find_call(lane, call_id, source_key)
        decision = None
        found: PipelineUnit | None = unit
        if unit is not None:
            committed, ended = lane_state(lane)
            decision = catalog.decide(unit, committed=committed, ended=ended)
            if decision.verdict is not Verdict.WAIT:
                return decision, unit
        elif (held := _held_call(lane, call_id, source_key)) is not None:
            decision = _wait_for_person(call_id, held, ended=lane.closed)
            if lane.closed:
                return decision, None
        elif (refused := _refused_hold(lane, call_id)) is not None:
            return _refused_by_person(refused), refused
        left = deadline - loop.time()
        if left <= 0 or lane.closed:
            if decision is not None:
                return decision, found
            raise UnknownCallError(f"no complete tool call {call_id!r} on run {lane.run!r}'s pipeline lane")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(lane.wait(seen), left)
