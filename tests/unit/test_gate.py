"""The action gate: which complete tool calls run now, which wait for the commit point, which never run."""

from __future__ import annotations

from typing import Any

import pytest

from streamrelay.core.contracts.units import CommitUnit, MalformedToolCallUnit, MessageUnit, PipelineUnit, ToolCallUnit
from streamrelay.core.events import EndStatus
from streamrelay.core.lanes.gate import (
    Action,
    ActionCatalog,
    ActionClass,
    GateDecision,
    Verdict,
)

CATALOG = ActionCatalog(
    [
        Action("search", ActionClass.IDEMPOTENT, description="web search"),
        Action("write_draft", ActionClass.REVERSIBLE),
        Action("charge_card", ActionClass.COMPENSABLE, compensation="refund_card"),
        Action("refund_card", ActionClass.IRREVERSIBLE),
        Action("send_email", ActionClass.IRREVERSIBLE),
    ]
)


def _call(name: str | None = "search", **args: Any) -> ToolCallUnit:
    return ToolCallUnit(index=1, run="r1", id="c1", name=name, args=args, source=None)


RUN, WAIT, REFUSE = Verdict.RUN, Verdict.WAIT, Verdict.REFUSE

# (tool, verdict while running uncommitted, verdict once committed, verdict after an end without commit)
POLICY = [
    ("search", RUN, RUN, RUN),
    ("write_draft", RUN, RUN, RUN),
    ("charge_card", WAIT, RUN, REFUSE),
    ("send_email", WAIT, RUN, REFUSE),
    ("not_listed", WAIT, RUN, REFUSE),
]


@pytest.mark.parametrize(("tool", "running", "committed", "ended"), POLICY)
def test_every_row_of_the_policy(tool: str, running: Verdict, committed: Verdict, ended: Verdict) -> None:
    unit = _call(tool)
    assert CATALOG.decide(unit, committed=False, ended=None).verdict is running
    assert CATALOG.decide(unit, committed=True, ended=None).verdict is committed
    assert CATALOG.decide(unit, committed=True, ended="ok").verdict is committed
    for status in ("error", "cancelled", "ok"):
        assert CATALOG.decide(unit, committed=False, ended=status).verdict is ended


def test_a_compensable_call_waits_and_names_its_compensation() -> None:
    decision = CATALOG.decide(_call("charge_card", amount_cents=500), committed=False, ended=None)
    assert decision.verdict is Verdict.WAIT
    assert decision.action_class is ActionClass.COMPENSABLE and decision.compensation == "refund_card"
    assert "refund_card" in decision.reason and "commit point" in decision.reason


def test_an_end_without_commit_refuses_and_says_so() -> None:
    decision = CATALOG.decide(_call("send_email"), committed=False, ended="cancelled")
    assert decision.verdict is Verdict.REFUSE
    assert "ended (cancelled) without passing its commit point" in decision.reason


def test_a_tool_not_in_the_catalog_is_treated_as_irreversible() -> None:
    decision = CATALOG.decide(_call("rm_rf"), committed=False, ended=None)
    assert decision.verdict is Verdict.WAIT and decision.action_class is ActionClass.IRREVERSIBLE
    assert "rm_rf is not in the action catalog: treated as irreversible" in decision.reason


def test_a_malformed_unit_is_refused_even_after_the_commit_point() -> None:
    unit = MalformedToolCallUnit(
        index=1,
        run="r1",
        id="c7",
        name="search",
        raw='{"q": "cats',
        error="arguments cut off by the end of the stream",
        source=None,
    )
    decision = CATALOG.decide(unit, committed=True, ended=None)
    assert decision.verdict is Verdict.REFUSE and decision.action_class is None
    assert "tool_call.malformed" in decision.reason and "cut off by the end of the stream" in decision.reason


@pytest.mark.parametrize(
    ("unit", "words"),
    [
        (MessageUnit(index=1, run="r1", status=EndStatus.OK, text="hi"), "'message' unit is not a tool call"),
        (CommitUnit(index=1, run="r1"), "'commit' unit is not a tool call"),
        (_call(None), "has no tool name"),
        (_call(""), "has no tool name"),
    ],
)
def test_anything_but_a_complete_call_is_refused(unit: PipelineUnit, words: str) -> None:
    decision = CATALOG.decide(unit, committed=True, ended=None)
    assert decision.verdict is Verdict.REFUSE and words in decision.reason


def test_to_json_shape() -> None:
    decision = CATALOG.decide(_call("charge_card"), committed=False, ended=None)
    assert decision.to_json() == {
        "verdict": "wait",
        "reason": decision.reason,
        "class": "compensable",
        "compensation": "refund_card",
    }
    refused = GateDecision(Verdict.REFUSE, "not a call")
    assert refused.to_json() == {"verdict": "refuse", "reason": "not a call", "class": None, "compensation": None}


def test_the_catalog_is_looked_up_by_name() -> None:
    assert CATALOG.get("search") == Action("search", ActionClass.IDEMPOTENT, description="web search")
    assert CATALOG.get("nope") is None
    assert "send_email" in CATALOG and len(CATALOG) == 5
    assert [a.name for a in CATALOG][:2] == ["search", "write_draft"]
    assert set(CATALOG.actions) == {"search", "write_draft", "charge_card", "refund_card", "send_email"}


@pytest.mark.parametrize(
    ("actions", "words"),
    [
        ([Action("a", ActionClass.IDEMPOTENT), Action("a", ActionClass.REVERSIBLE)], "twice"),
        ([Action("charge", ActionClass.COMPENSABLE)], "name its compensation"),
        ([Action("charge", ActionClass.COMPENSABLE, compensation="refund")], "not another catalog action"),
        ([Action("charge", ActionClass.COMPENSABLE, compensation="charge")], "not another catalog action"),
        (
            [Action("mail", ActionClass.IRREVERSIBLE, compensation="x"), Action("x", ActionClass.IDEMPOTENT)],
            "only a compensable action",
        ),
    ],
)
def test_an_inconsistent_catalog_is_rejected(actions: list[Action], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ActionCatalog(actions)
