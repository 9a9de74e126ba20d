"""The action gate holds a call a person must approve (core/lanes/hold.py, docs/approvals.md): the rule's table, the
hold's ids, and a Relay in-process: the call stays off the pipeline lane until Approve (then it follows its
``approval`` unit and the gate says run), never reaches it on Deny or expiry (the gate refuses), and a journal replayed
into a fresh Relay (what a restart after kill -9 does) neither loses a hold nor releases a call twice."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from streamrelay.config.actions import load_actions
from streamrelay.config.paths import CHECKOUT
from streamrelay.config.settings import load_settings
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.errors import ConfigError, IngestError
from streamrelay.core.events import Source
from streamrelay.core.lanes.gate import Action, ActionCatalog, ActionClass, Verdict
from streamrelay.core.lanes.hold import hold_id, hold_request, masked, needs_person
from streamrelay.core.lanes.pipeline import FinishedCall
from streamrelay.core.policy import ChannelPolicy, apply_overrides
from streamrelay.core.records.journal import MemoryJournal
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.approvals import DecisionRefused
from streamrelay.core.run.relay import Relay
from tests.unit.fakes import MemoryChat

pytestmark = pytest.mark.timeout(60)

CATALOG = ActionCatalog(
    [
        Action("search", ActionClass.IDEMPOTENT),
        Action("write_draft", ActionClass.REVERSIBLE),
        Action("charge_card", ActionClass.COMPENSABLE, compensation="refund_card"),
        Action("refund_card", ActionClass.IRREVERSIBLE),
    ]
)

# (rule, tool, held)
RULES = [
    (("irreversible",), "refund_card", True),
    (("irreversible",), "not_in_catalog", True),  # an unknown tool is irreversible, as the gate takes it
    (("irreversible",), "charge_card", False),
    (("irreversible",), "search", False),
    (("irreversible", "compensable"), "charge_card", True),
    (("search",), "search", True),  # a tool named
    (("search",), "write_draft", False),
    ((), "refund_card", False),  # no rule: nothing held
    (("irreversible",), None, False),  # no name: the gate refuses it anyway
]


@pytest.mark.parametrize(("rule", "tool", "held"), RULES)
def test_which_calls_need_a_person(rule: tuple[str, ...], tool: str | None, held: bool) -> None:
    assert needs_person(tool, CATALOG, rule) is held


def test_hold_ids_are_readable_deterministic_and_unique_per_run() -> None:
    assert hold_id("call_1", None) == "gate.call_1"
    assert hold_id("call_1", None, {"gate.call_1"}) == "gate.call_1.2"  # an id used again: the next one
    assert hold_id("call_1", None, {"gate.call_1", "gate.call_1.2"}) == "gate.call_1.3"
    child = hold_id("call_1", Source(agent_id="researcher"))
    assert child.startswith("gate.h-") and child == hold_id("call_1", Source(agent_id="researcher"))
    assert child != hold_id("call_1", Source(agent_id="writer"))  # two agents' call ids never share a hold
    odd = hold_id("toolu/01 é" + "x" * 80, None)
    assert odd.startswith("gate.h-") and len(odd) == len("gate.h-") + 16


def test_a_run_may_add_holds_never_remove_them() -> None:
    policy = ChannelPolicy(name="c", approvers=("telegram:user:1",), approve_actions=("irreversible",))
    more = apply_overrides(policy, {"approve_actions": ["search"]})
    assert more.approve_actions == ("irreversible", "search")
    assert apply_overrides(policy, {"approve_actions": []}).approve_actions == ("irreversible",)
    nobody = ChannelPolicy(name="c")
    with pytest.raises(IngestError, match="names nobody who may decide"):
        apply_overrides(nobody, {"approve_actions": ["irreversible"]})
    with pytest.raises(IngestError, match="list of action classes"):
        apply_overrides(policy, {"approve_actions": "irreversible"})


POLICY = ChannelPolicy(
    name="c", throttle_s=0, approvers=("telegram:user:1",), approve_actions=("irreversible",), approve_ttl_s=300.0
)
START = {"kind": "run.start", "run": "r", "seq": 0, "channel": "c", "target": {"chat_id": 5}}


def _relay(journal: MemoryJournal, ledger: MemoryLedger, chat: MemoryChat | None = None) -> Relay:
    catalog, validate = load_actions()
    channels = {"c": ChannelRuntime(POLICY, chat or MemoryChat())}
    return Relay(channels, ledger, MonotonicClock(), journal=journal, validator=validate, catalog=catalog)


def _call(seq: int, call_id: str, name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    """A normalized tool call: its start and its end with the whole arguments."""
    return [
        {"kind": "tool_call", "run": "r", "seq": seq, "id": call_id, "name": name, "state": "start"},
        {"kind": "tool_call", "run": "r", "seq": seq + 1, "id": call_id, "state": "end", "args": args},
    ]


def _units(relay: Relay) -> list[dict[str, Any]]:
    return [u.model_dump(mode="json") for u in relay.pipeline("r") or []]


async def _submit(relay: Relay, lines: list[dict[str, Any]]) -> None:
    results = await relay.submit_lines([(line, None) for line in lines])
    assert all(not isinstance(r, Exception) for r in results), results


async def _settled(relay: Relay, count: int) -> list[dict[str, Any]]:
    """The lane once it has ``count`` units (the run stage takes the lines on its own task)."""
    lane = relay.lane("r")
    assert lane is not None
    while len(lane.units) < count:
        await lane.wait(len(lane.units))
    return _units(relay)


REFUND = {"charge_id": "ch_1", "amount_cents": 4999}


async def test_an_irreversible_call_reaches_the_lane_only_after_approve() -> None:
    journal, ledger, chat = MemoryJournal(), MemoryLedger(), MemoryChat()
    relay = _relay(journal, ledger, chat)
    await _submit(
        relay, [START, *_call(1, "s1", "search", {"q": "order A-1029"}), *_call(3, "c1", "refund_card", REFUND)]
    )
    units = await _settled(relay, 1)
    assert [(u["kind"], u["id"]) for u in units] == [("tool_call", "s1")]  # the search runs; the refund is held
    decision, unit = await relay.gate("r", "c1")
    assert (decision.verdict, unit) == (Verdict.WAIT, None)
    assert "gate.c1" in decision.reason and "person" in decision.reason
    asked = relay.approval("r", "gate.c1")
    assert asked["state"] == "pending" and asked["expires_at"] > 0
    kinds = [json.loads(line).get("kind") for line in await journal.lines("r")]
    assert kinds.count("approval.expiry") == 1  # the hold's expiry fixed once, journaled with the call's line

    await relay.decide_approval("r", "gate.c1", "approve", "telegram:user:1")
    units = await _settled(relay, 3)
    approval, released = units[1], units[2]
    assert (approval["kind"], approval["id"], approval["call"], approval["decision"]) == (
        "approval",
        "gate.c1",
        "c1",
        "approved",
    )
    assert (released["kind"], released["id"], released["approval"], released["args"]) == (
        "tool_call",
        "c1",
        "gate.c1",
        REFUND,
    )
    decision, unit = await relay.gate("r", "c1")
    assert decision.verdict is Verdict.RUN and "approved" in decision.reason  # before the commit point: a person said
    assert unit is not None and unit.model_dump(mode="json") == released
    await relay.close()


async def test_deny_and_expiry_refuse_the_call_which_never_reaches_the_lane() -> None:
    relay = _relay(MemoryJournal(), MemoryLedger())
    await _submit(relay, [START, *_call(1, "c1", "refund_card", REFUND), *_call(3, "c2", "delete_account", {})])
    try:
        await relay.decide_approval("r", "gate.c1", "deny", "telegram:user:9")  # a stranger: nothing changes
    except DecisionRefused as refused:
        assert refused.status == 403
    else:
        raise AssertionError("a stranger decided a hold")
    assert relay.approval("r", "gate.c1")["state"] == "pending"
    await relay.decide_approval("r", "gate.c1", "deny", "telegram:user:1")
    decision, unit = await relay.gate("r", "c1", wait_s=5)
    assert decision.verdict is Verdict.REFUSE and "denied by telegram:user:1" in decision.reason
    assert unit is not None and unit.model_dump(mode="json")["call"] == "c1"
    await relay.decide_approval("r", "gate.c2", "expire", None)  # the sidecar's own decision at the expiry
    decision, _ = await relay.gate("r", "c2", wait_s=5)
    assert decision.verdict is Verdict.REFUSE and "expired" in decision.reason
    units = _units(relay)
    assert [u["kind"] for u in units] == ["approval", "approval"]  # no tool_call unit ever
    await relay.close()


async def test_a_restart_keeps_the_hold_and_releases_the_call_once() -> None:
    journal, ledger = MemoryJournal(), MemoryLedger()
    first = _relay(journal, ledger)
    await _submit(first, [START, *_call(1, "c1", "refund_card", REFUND), *_call(3, "c2", "refund_card", REFUND)])
    await first.decide_approval("r", "gate.c1", "approve", "telegram:user:1")
    await _settled(first, 2)
    before = _units(first)
    await first.close()  # (kill -9: nothing more of it runs; the journal has every line)

    second = _relay(journal, ledger)
    assert await second.resume() == ["r"]
    assert await _settled(second, 2) == before  # c1 released once, at the same place; c2 still held
    assert second.approval("r", "gate.c2")["state"] == "pending"
    decision, _ = await second.gate("r", "c2")
    assert decision.verdict is Verdict.WAIT
    await second.decide_approval("r", "gate.c2", "approve", "telegram:user:1")
    units = await _settled(second, 4)
    assert [(u["kind"], u["id"]) for u in units] == [
        ("approval", "gate.c1"),
        ("tool_call", "c1"),
        ("approval", "gate.c2"),
        ("tool_call", "c2"),
    ]
    await second.close()

    third = _relay(journal, ledger)
    assert await third.resume() == ["r"]
    assert await _settled(third, 4) == units  # replayed again: each call released once, never twice
    await third.close()


async def test_a_call_with_bad_arguments_is_never_asked() -> None:
    relay = _relay(MemoryJournal(), MemoryLedger())
    await _submit(relay, [START, *_call(1, "c1", "refund_card", {"amount_cents": 5})])  # the schema's fields missing
    units = await _settled(relay, 1)
    assert units[0]["kind"] == "tool_call.malformed"
    with pytest.raises(IngestError):
        relay.approval("r", "gate.c1")
    await relay.close()


def test_the_docs_settings_load_and_a_hold_without_approvers_is_refused(tmp_path: Path) -> None:
    """docs/approvals.md's ``approve_actions`` block loads as written; a channel (or a client's channel) holding calls
    that names nobody who may decide them is refused at start-up, saying what to set."""
    text = (CHECKOUT / "docs" / "approvals.md").read_text(encoding="utf-8")
    block = re.search(r"## The action gate holds a call.*?```toml\n(.*?)```", text, re.S)
    assert block is not None, "docs/approvals.md lost its approve_actions example"
    path = tmp_path / "channels.toml"
    path.write_text(block.group(1), encoding="utf-8")
    settings = load_settings(path)
    policy = settings.channels["support"].policy("support")
    assert (policy.approve_actions, policy.approve_ttl_s) == (("irreversible", "charge_card"), 600.0)
    assert settings.client_limits()["billing"].approve_actions == ("compensable",)

    path.write_text('[channels.s]\nplatform = "slack"\napprove_actions = ["irreversible"]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="approve_actions: nobody may decide"):
        load_settings(path)
    path.write_text(
        '[channels.s]\nplatform = "slack"\n[clients.b]\ntoken_env = "B"\napprove_actions = ["irreversible"]\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"clients.b.approve_actions: channels \['s'\] name nobody"):
        load_settings(path)


def test_the_question_shows_the_call_with_its_secrets_masked() -> None:
    args: dict[str, Any] = {
        "to": "a@example.com",
        "api_key": "k-123",
        "headers": [{"note": "Bearer abc.def"}, "plain"],
        "body": {"password": "hunter2", "text": "Hello"},
    }
    request = hold_request("r", FinishedCall("c1", "send_email", None, args), "gate.c1", 60.0)
    assert request.question == "Run the tool send_email?" and request.ttl_s == 60.0
    assert request.action is not None
    shown = json.loads(request.action.removeprefix("send_email(").removesuffix(")"))
    assert shown == {
        "to": "a@example.com",
        "api_key": "•••",
        "headers": "•••",
        "body": {"password": "•••", "text": "Hello"},
    }
    assert masked([{"token": 1}, "sk-live-abc", "ok"]) == [{"token": "•••"}, "•••", "ok"]
    assert args["api_key"] == "k-123"  # the call itself is left as it came (the parent loop gets it whole)
