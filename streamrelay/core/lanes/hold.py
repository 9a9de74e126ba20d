"""The action gate's hold: a tool call a person must approve stays off the pipeline lane until they do.

A channel (or a client, or a run, adding to them) names the actions that need a person: ``approve_actions``, a list
of action classes (``irreversible``, ``compensable``, ...; :class:`core.lanes.gate.ActionClass`) and tool names. A
tool that is not in the action catalog counts as ``irreversible`` (as the gate takes it). When such a call's
arguments are complete and valid (a ``tool_call`` unit to be), admission asks a person first: an
``approval.request`` (:mod:`core.run.approvals`) whose id is :func:`hold_id` of the call, asking "Run the tool
NAME?" with the call as its action, decided by the channel's ``approvers`` (or anyone, where the channel says
``approvals_anyone``), expiring after ``approve_ttl_s`` seconds as denied. The run stage keeps the call back:

    press              on the pipeline lane                                    the gate
    (none yet)         nothing                                                  wait (names the approval)
    Approve            ``approval`` unit (``call``: the id), then the call       run (``approval`` on the unit)
                       as a ``tool_call`` unit with ``approval`` set
    Deny, expiry       ``approval`` unit (``call``: the id), no call            refuse (the ``approval`` unit)
    run ends first     nothing (the approval's message says "Not decided")       404: no call on the lane

Everything here is decided from journaled lines in their order (the request is derived from the call's line, the
decision is its own journaled line), so a restarted sidecar, kill -9 included, rebuilds the same hold and releases
the call once, or never. docs/approvals.md ("The action gate holds a call") is the user's side.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from streamrelay.core.delivery.status import SECRET_KEY, SECRET_VALUE
from streamrelay.core.events import APPROVAL_ID, ApprovalRequest, Source
from streamrelay.core.json_types import JsonValue
from streamrelay.core.lanes.gate import ActionCatalog, ActionClass
from streamrelay.core.lanes.pipeline import FinishedCall

HOLD_PREFIX = "gate."
"""What the id of a hold's approval starts with (an agent's own approval ids may start so too: the book keeps which
approvals hold a call)."""
DEFAULT_HOLD_TTL_S = 600.0
"""How long a held call waits for a person unless the channel says ``approve_ttl_s`` (seconds); then it is denied."""
ACTION_CLASSES = frozenset(str(c) for c in ActionClass)


def needs_person(name: str | None, catalog: ActionCatalog, rule: Iterable[str]) -> bool:
    """Whether a complete call of tool ``name`` waits for a person: ``rule`` (``approve_actions``) names its tool or
    its class. A tool not in ``catalog`` is ``irreversible``; a call without a name is never held (the gate refuses
    it anyway). O(len(rule))."""
    if not name:
        return False
    action = catalog.get(name)
    cls = str(action.cls) if action is not None else str(ActionClass.IRREVERSIBLE)
    return any(entry in (name, cls) for entry in rule)


def hold_id(call_id: str, source: Source | None, taken: Iterable[str] | None = None) -> str:
    """The id of the approval holding call ``call_id`` of ``source`` (None: the root agent): ``gate.<call id>`` for
    the root's call whose id fits an approval id (1-64 of ``[A-Za-z0-9_.:-]``), else ``gate.h-`` and 16 hex of a hash
    of the source's key and the call id. An id in ``taken`` (an agent that numbers its calls per turn used the id
    again) gets ``.2``, ``.3``, ... in the order the calls came: deterministic, so a journal replay gives the same."""
    plain = HOLD_PREFIX + call_id
    if source is None and APPROVAL_ID.fullmatch(plain) is not None and len(plain) <= 60:
        base = plain
    else:
        key = (source.key if source is not None else "root") + "\x00" + call_id
        base = HOLD_PREFIX + "h-" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    used = set(taken or ())
    if base not in used:
        return base
    n = 2
    while f"{base}.{n}" in used:
        n += 1
    return f"{base}.{n}"


def masked(value: JsonValue) -> JsonValue:
    """``value`` with the value of every secret-looking key (password, token, api_key, card, ...) and every
    secret-looking string (a bearer token, ``sk-...``, a card number) replaced by ``•••``, at any depth: what a person
    deciding on a call is shown (the call itself reaches the parent loop as it came). Iterative: no recursion limit."""
    root: list[JsonValue] = [value]
    stack: list[tuple[list[JsonValue] | dict[str, JsonValue], int | str]] = [(root, 0)]
    while stack:
        holder, key = stack.pop()
        item = holder[key]  # type: ignore[index]
        if isinstance(item, str) and SECRET_VALUE.search(item):
            holder[key] = "•••"  # type: ignore[index]
        elif isinstance(item, dict):
            copy: dict[str, JsonValue] = {}
            for name, inner in item.items():
                copy[name] = "•••" if SECRET_KEY.search(name) else inner
                if not SECRET_KEY.search(name):
                    stack.append((copy, name))
            holder[key] = copy  # type: ignore[index]
        elif isinstance(item, list):
            items = list(item)
            holder[key] = items  # type: ignore[index]
            stack.extend((items, i) for i in range(len(items)))
    return root[0]


def hold_request(run: str, call: FinishedCall, approval_id: str, ttl_s: float) -> ApprovalRequest:
    """The ``approval.request`` holding the complete call ``call``: "Run the tool NAME?", the call (its arguments as
    compact JSON, secrets masked by :func:`masked`, cut to 1,000 characters) as the action; who may decide is the
    channel's, denied after ``ttl_s`` seconds. Its ``source`` is the call's (a sub-agent's call is asked in the run's
    conversation as the root's are).
    """
    shown = masked(call.args) if call.args is not None else {}
    args = json.dumps(shown, ensure_ascii=False, separators=(",", ":"))
    action = f"{call.name}({args})"
    if len(action) > 1000:
        action = action[:999] + "…"
    return ApprovalRequest(
        run=run,
        id=approval_id,
        question=f"Run the tool {call.name}?"[:1000],
        action=action,
        ttl_s=ttl_s,
        source=call.source,
    )
