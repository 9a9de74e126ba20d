"""Ended runs on replicas (issue 27): a correction and a desk resend posted to a replica that does not own the run are
forwarded to its owner, which applies them once with its fencing token; every replica answers the same; a correction
whose owner is killed -9 mid-way is resumed by the partition's next owner; a run's audit and erasure asked of a
replica that does not own it are done by its owner, a conversation's erasure by its partition's owner (no Redis key
holds the erased text after); an approval pressed through a replica that does not own the run, its owner killed -9
right after the press, is decided once (issue 27: one ``approval`` unit, the message edited once). Three ``streamrelay
serve`` replicas on a real redis-server, delivering through aiogram to the stateful mock Telegram (one cluster for the
whole story: each replica costs seconds of CPU to start)."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamrelay.adapters.redis.client import Redis
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.core.run.approvals import button_ids
from streamrelay.mocks.common import MockPlatform
from tests.integration.test_approvals_platforms import telegram_buttons
from tests.redis.test_erase_redis import _everything
from tests.redis.test_failover import TOKEN, _owner, _process_cluster, _until, post_as_agent

pytestmark = pytest.mark.timeout(300)
AUTH = {"Authorization": f"Bearer {TOKEN}"}
OLD = [
    "Your refund of 49.99 EUR was declined.",
    "The order A-1029 is outside the window.",
    "Write to support if you disagree.",
]
NEW = [
    "Your refund of 49.99 EUR was approved.",
    "The order A-1029 is inside the window.",
    "It reaches your card within 14 days.",
]
LONGER = [*NEW, "You will get an email when it is sent."]
MARK = "lynx-saffron-4417"


def _ndjson(run: str, chat: int, paragraphs: list[str]) -> bytes:
    target = DRY_RUN["telegram"].target().model_copy(update={"chat_id": chat})
    events: list[dict[str, Any]] = [
        {"kind": "run.start", "channel": "chat", "target": target.model_dump()},
        {"kind": "text", "mode": "delta", "text": "\n\n".join(paragraphs)},
        {"kind": "end", "status": "ok"},
    ]
    return "".join(json.dumps({"run": run, **event}) + "\n" for event in events).encode()


def _edits(mock: MockPlatform, chat: int) -> dict[str, int]:
    counts: dict[str, int] = {}
    for call in mock.calls:
        if call.method == "editMessageText" and call.ok and str(call.chat_id) == str(chat):
            counts[str(call.message_id)] = counts.get(str(call.message_id), 0) + 1
    return counts


def _sends(mock: MockPlatform, chat: int) -> int:
    return sum(1 for c in mock.calls if c.method == "sendMessage" and c.ok and str(c.chat_id) == str(chat))


async def _delivered(http: httpx.AsyncClient, base: str, run: str, chat: int, paragraphs: list[str]) -> dict[str, Any]:
    posted = await post_as_agent(http, base + f"/v1/runs/{run}/events", _ndjson(run, chat, paragraphs))
    assert posted.status_code == 200, posted.text
    report = await http.get(base + f"/v1/runs/{run}", params={"wait_s": 60})
    assert report.status_code == 200, report.text
    return dict(report.json())


async def test_corrections_and_the_desk_on_any_replica_and_through_an_owners_kill(
    tmp_path: Path, redis_url: str, client: Redis
) -> None:
    async with (
        _process_cluster(tmp_path, redis_url, client, "final", extra="limit = 50") as (mock, replicas),
        httpx.AsyncClient(headers=AUTH, timeout=60) as http,
    ):
        # 1. A correction posted to a replica that does not own the run: applied once, by the owner.
        chat = 7101
        report = await _delivered(http, replicas.url(0), "fix-run", chat, OLD)
        assert report["status"] == "delivered" and len(report["message_ids"]) == 3, report
        ids = [str(m) for m in report["message_ids"]]
        owner = await _owner(client, replicas, "fix-run")
        a, b = [i for i in range(3) if i != owner]
        body = {"kind": "run.correct", "id": "fix-1", "text": "\n\n".join(NEW)}
        fixed = await http.post(replicas.url(a) + "/v1/runs/fix-run/corrections", json=body)
        assert fixed.status_code == 200, fixed.text
        assert fixed.json()["state"] == "applied" and fixed.json()["after"] == ids, fixed.text
        assert [t for _, t in mock.visible(chat)] == NEW
        assert _edits(mock, chat) == dict.fromkeys(ids, 1)  # each message edited once

        # 2. The same id again, to another replica and to the owner: the same correction, nothing edited again.
        for i in (b, owner):
            again = await http.post(replicas.url(i) + "/v1/runs/fix-run/corrections", json=body)
            assert again.status_code == 200 and again.json()["state"] == "applied", (i, again.text)
        assert _edits(mock, chat) == dict.fromkeys(ids, 1)
        other = await http.post(replicas.url(b) + "/v1/runs/fix-run/corrections", json={**body, "text": "Else."})
        assert other.status_code == 409 and "new id" in other.json()["error"], other.text

        # 3. Every replica lists the same corrections and shows them in the run's report.
        listings = [
            (await http.get(replicas.url(i) + "/v1/runs/fix-run/corrections")).json()["corrections"] for i in range(3)
        ]
        assert listings[0] == listings[1] == listings[2] and [c["id"] for c in listings[0]] == ["fix-1"], listings
        one = await http.get(replicas.url(a) + "/v1/runs/fix-run/corrections/fix-1")
        assert one.status_code == 200 and one.json() == listings[0][0], one.text
        shown = await http.get(replicas.url(b) + "/v1/runs/fix-run")
        assert [c["id"] for c in shown.json()["corrections"]] == ["fix-1"], shown.text
        unknown = await http.post(replicas.url(a) + "/v1/runs/nope/corrections", json=body)
        assert unknown.status_code == 404, unknown.text

        # 4. The desk: a final the platform refused is listed by every replica and resent once, by the owner.
        desk_chat = 7102
        mock.script.add_fault(
            "sendMessage",
            mock.script.count("sendMessage") + 1,
            {"status": 403, "description": "Forbidden: bot was blocked by the user"},
        )
        refused = await _delivered(http, replicas.url(1), "desk-run", desk_chat, ["Your refund was approved."])
        assert refused["failed"] == 1, refused
        listed = [(await http.get(replicas.url(i) + "/v1/deliveries")).json() for i in range(3)]
        entries = [[d for d in each["deliveries"] if d["run"] == "desk-run"] for each in listed]
        assert all(len(e) == 1 and e[0]["state"] == "failed" for e in entries), listed
        assert all(each["counts"]["failed"] >= 1 for each in listed), listed
        entry = entries[0][0]["id"]
        desk_owner = await _owner(client, replicas, "desk-run")
        elsewhere = next(i for i in range(3) if i != desk_owner)
        shown_entry = await http.get(replicas.url(elsewhere) + f"/v1/deliveries/{entry}")
        assert shown_entry.json()["text"] == "Your refund was approved.", shown_entry.text
        resent = await http.post(replicas.url(elsewhere) + f"/v1/deliveries/{entry}/resend")
        assert resent.status_code == 200 and resent.json()["state"] == "delivered", resent.text
        assert [t for _, t in mock.visible(desk_chat)] == ["Your refund was approved."]
        twice = await http.post(replicas.url(desk_owner) + f"/v1/deliveries/{entry}/resend")
        assert twice.status_code == 409 and twice.json()["delivery"]["state"] == "delivered", twice.text
        assert [t for _, t in mock.visible(desk_chat)] == ["Your refund was approved."]  # never a second copy
        gone = await http.post(replicas.url(elsewhere) + "/v1/deliveries/dlv-000000000000/resend")
        assert gone.status_code == 404, gone.text

        # 5. Erasure and audit of a run through a replica that does not own it (issue 29): forwarded to the owner,
        # which audits through its adapters and erases through its partition's stores and its own memory.
        erase_chat = 7104
        marked = ["Your parcel lynx-saffron-4417 left the depot.", "It arrives on Thursday."]
        delivered = await _delivered(http, replicas.url(2), "erase-run", erase_chat, marked)
        assert MARK in await _everything(client)  # its ledger parts hold the shown text
        erase_owner = await _owner(client, replicas, "erase-run")
        front_only = next(i for i in range(3) if i != erase_owner)
        audit = await http.get(replicas.url(front_only) + "/v1/runs/erase-run/audit")
        assert audit.status_code == 200 and audit.json()["run"] == "erase-run", audit.text
        assert audit.json()["readable"] is False and audit.json()["messages"] == [], audit.text  # Telegram reads none
        erased = await http.delete(replicas.url(front_only) + "/v1/runs/erase-run")
        assert erased.status_code == 200 and erased.json()["erased"] is True, erased.text
        removed = erased.json()["removed"]
        assert removed["memory"] == 1 and removed["ledger"] >= 2, removed  # the owner's finished run, both parts
        dump = await _everything(client)
        assert MARK not in dump and "arrives on Thursday" not in dump
        assert "inside the window" in dump  # another run's (corrected) text untouched
        kept = await http.get(replicas.url(front_only) + "/v1/runs/erase-run")
        assert kept.status_code == 200, kept.text  # ids and counts stay, no text (as on SQLite)
        assert kept.json()["confirmed"] == delivered["confirmed"] == 2, kept.text
        assert kept.json()["message_ids"] == delivered["message_ids"], kept.text
        assert MARK not in kept.text
        again = await http.delete(replicas.url(erase_owner) + "/v1/runs/erase-run")
        assert again.status_code == 200 and again.json()["removed"] == {"memory": 0, "journal": 0, "ledger": 0}
        assert (await http.delete(replicas.url(front_only) + "/v1/runs/nope")).status_code == 404
        assert (await http.get(replicas.url(front_only) + "/v1/runs/nope/audit")).status_code == 404
        # the whole conversation, through a replica that does not own its partition: both of its runs, once
        await _delivered(
            http, replicas.url(front_only), "erase-run-2", erase_chat, ["Parcel gannet-teal-9902 is late."]
        )
        assert "gannet-teal-9902" in await _everything(client)
        chat_erase = await http.delete(replicas.url(front_only) + f"/v1/conversations/chat/{erase_chat}")
        assert chat_erase.status_code == 200, chat_erase.text
        assert chat_erase.json()["runs"] == ["erase-run", "erase-run-2"], chat_erase.text
        assert chat_erase.json()["removed"]["memory"] == 1 and chat_erase.json()["removed"]["ledger"] >= 1, (
            chat_erase.text
        )
        assert "gannet-teal-9902" not in await _everything(client)
        none = await http.delete(replicas.url(erase_owner) + "/v1/conversations/chat/7199")
        assert none.status_code == 200 and none.json()["runs"] == [], none.text

        # 6. The owner killed -9 in the middle of a correction: the partition's next owner resumes it.
        kill_chat = 7103
        report = await _delivered(http, replicas.url(0), "kill-run", kill_chat, OLD)
        ids = [str(m) for m in report["message_ids"]]
        owner = await _owner(client, replicas, "kill-run")
        front = next(i for i in range(3) if i != owner)
        mock.set_latency("editMessageText", [1500.0] * 10)
        longer = {"kind": "run.correct", "id": "fix-k", "text": "\n\n".join(LONGER)}
        posting = asyncio.create_task(http.post(replicas.url(front) + "/v1/runs/kill-run/corrections", json=longer))
        await _until(lambda: sum(_edits(mock, kill_chat).values()) >= 1, 60, "the first edit")
        replicas.procs[owner].send_signal(signal.SIGKILL)
        replicas.procs[owner].wait(10)
        cut = await posting  # the front's forward lost its owner: 503, send it again
        assert cut.status_code in (200, 503), cut.text  # 503: the forward lost its owner; sent again below
        mock.set_latency("editMessageText", [])
        alive = [i for i in range(3) if i != owner]

        async def applied() -> bool:
            found = await http.get(replicas.url(alive[0]) + "/v1/runs/kill-run/corrections/fix-k")
            return found.status_code == 200 and found.json()["state"] == "applied"

        await _until(applied, 60, "the correction resumed by the next owner")
        again = await http.post(replicas.url(alive[1]) + "/v1/runs/kill-run/corrections", json=longer)
        assert again.status_code == 200 and again.json()["state"] == "applied", again.text
        assert [t for _, t in mock.visible(kill_chat)] == LONGER  # each chunk shown once, in order
        edits = _edits(mock, kill_chat)
        assert set(edits) == set(ids) and edits[ids[0]] == 1, edits  # the edit answered before the kill: once
        assert all(n <= 2 for n in edits.values()), edits  # the one in flight at the kill may be made again
        assert _sends(mock, kill_chat) == 4  # three for the answer, one for the fourth chunk
        assert again.json()["after"][:3] == ids and len(again.json()["after"]) == 4

        # 7. An approval pressed through a replica that does not own the run, its owner killed -9 at once (the
        # decision journaled; the lane's unit, the edit and the buttons' removal maybe not yet): the last replica
        # takes the partition over and replays it: one decision, one `approval` unit, the message edited once.
        ask_chat, approver = 7105, "telegram:user:42"
        target = DRY_RUN["telegram"].target().model_copy(update={"chat_id": ask_chat})
        asking = [
            {"seq": 0, "kind": "run.start", "channel": "chat", "target": target.model_dump()},
            {
                "seq": 1,
                "kind": "approval.request",
                "id": "refund",
                "question": "Refund 49.99 EUR for order A-1029?",
                "action": "refund(order='A-1029', amount=49.99)",
                "approvers": [approver],
                "ttl_s": 600,
            },
        ]
        lines = "".join(json.dumps({"run": "ask-run", **e}) + "\n" for e in asking).encode()
        asked = await post_as_agent(http, replicas.url(alive[0]) + "/v1/runs/ask-run/events", lines)
        assert asked.status_code == 200, asked.text

        def asks() -> list[tuple[int | str, str]]:
            return [(m, t) for m, t in mock.visible(ask_chat) if t.startswith("🔐")]

        await _until(lambda: len(asks()) == 1, 60, "the approval message")
        message_id = asks()[0][0]
        approve, _ = button_ids("ask-run", "refund")
        await _until(lambda: approve in telegram_buttons(mock, ask_chat, message_id), 60, "its buttons")
        ask_owner = await _owner(client, replicas, "ask-run")
        presser = next(i for i in alive if i != ask_owner)
        press = {"decision": "approve", "by": approver}
        decided = await http.post(replicas.url(presser) + "/v1/runs/ask-run/approvals/refund", json=press)
        assert decided.status_code == 200 and decided.json()["decision"] == "approved", decided.text
        replicas.procs[ask_owner].send_signal(signal.SIGKILL)
        replicas.procs[ask_owner].wait(10)

        async def second_press() -> httpx.Response | None:
            answer = await http.post(
                replicas.url(presser) + "/v1/runs/ask-run/approvals/refund", json={**press, "decision": "deny"}
            )
            return None if answer.status_code == 503 else answer  # 503: the partition is being taken over

        late = None
        for _ in range(600):
            late = await second_press()
            if late is not None:
                break
            await asyncio.sleep(0.1)
        assert late is not None and late.status_code == 409, late.text if late is not None else "503 for 60 s"
        assert (late.json()["approval"]["decision"], late.json()["approval"]["by"]) == ("approved", approver)

        async def one_unit() -> bool:
            units = (await http.get(replicas.url(presser) + "/v1/runs/ask-run/pipeline")).json().get("units", [])
            return [(u["decision"], u["by"]) for u in units if u["kind"] == "approval"] == [("approved", approver)]

        await _until(one_unit, 60, "exactly one approval unit on the lane")
        await _until(lambda: "✅ Approved by" in asks()[0][1], 60, "the decision shown")
        await _until(lambda: telegram_buttons(mock, ask_chat, message_id) == [], 60, "the buttons gone")
        assert len(asks()) == 1 and asks()[0][0] == message_id  # edited in place, never sent again
