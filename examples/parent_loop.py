"""A parent loop that acts only on complete, checked units: the pipeline lane and the action gate.

The parent streams its run into the sidecar (a sub-agent's work included, with its ``source``), reads the run's
pipeline lane (never the preview text), and asks the gate before running each tool call: ``search`` is
idempotent, so it may run at once; ``send_email`` is irreversible, so it waits for the run's commit point,
which the parent passes once its answer is checked.

Units come typed (:mod:`core.contracts`): the loop matches on their classes, and mypy (CI runs it over examples/)
refuses a field a unit does not have.

Run it against a sidecar (README, "Sub-agents, lanes and the action gate")::

    uv run python examples/parent_loop.py            # STREAMRELAY_URL, STREAMRELAY_TOKEN, CHAT_ID
"""

from __future__ import annotations

import asyncio
import os
import uuid

from streamrelay import RelayClient
from streamrelay.core.contracts.report import RunReport
from streamrelay.core.contracts.units import MessageUnit, StopUnit, ToolCallUnit

RESEARCHER = {"agent_id": "researcher", "session_id": "s-research", "depth": 1, "path": "root/researcher"}
SEARCH = {"kind": "tool_call", "id": "c1", "name": "search", "source": RESEARCHER}  # the researcher's call


async def main(url: str, token: str, chat_id: int | str, channel: str = "telegram") -> RunReport:
    run = f"example-{uuid.uuid4().hex[:8]}"
    async with RelayClient(url, token) as relay:
        await relay.start(run, channel=channel, chat_id=chat_id, overrides={"subagents": "status"})
        await relay.send(
            run,
            [
                {"kind": "phase", "name": "planning"},
                # The sub-agent's tool call streams in fragments: it is a unit only once complete.
                {**SEARCH, "state": "start"},
                {**SEARCH, "state": "args_delta", "args_delta": '{"q": "refu'},
                {**SEARCH, "state": "args_delta", "args_delta": 'nd policy"}'},
                {**SEARCH, "state": "end"},
                {"kind": "text", "text": "Refunds take 14 days.", "source": RESEARCHER},  # never in the answer
                {"kind": "end", "status": "ok", "source": RESEARCHER},  # → a "message" unit for the parent
                {"kind": "text", "text": "Refunds take 14 days. I have emailed you the details."},
                {
                    "kind": "tool_call",
                    "id": "c2",
                    "name": "send_email",
                    "state": "end",
                    "args": {"to": "ann@example.com", "subject": "Your refund", "body": "14 days."},
                },
            ],
        )
        for unit in await relay.units(run):  # complete units only: tool calls, the researcher's message
            match unit:
                case ToolCallUnit(id=call_id, name=name):
                    decision = await relay.gate(run, call_id)
                    print(f"{name}: {decision.verdict} ({decision.reason})")
                case MessageUnit(source=source, text=text):
                    print(f"{source.agent_id if source else 'the agent'} says: {text}")
                case StopUnit(by=by):  # a person pressed Stop: the run ended cancelled, nothing more is taken
                    print(f"stopped by {by or 'the reader'}: the agent stops here")
                    return await relay.report(run, wait_s=30)
        # The answer passed the parent's checks: the commit point. Now send_email may run.
        await relay.send(run, [{"kind": "commit"}])
        decision = await relay.gate(run, "c2", wait_s=10)
        print(f"send_email after the commit: {decision.verdict}")
        await relay.send(run, [{"kind": "end", "status": "ok"}])
        report = await relay.report(run, wait_s=30)
        print(f"delivery: {report.status}, messages {report.message_ids}")
        return report


async def cancel_on_stop(relay: RelayClient, run: str, agent: asyncio.Task[object]) -> StopUnit | None:
    """Follow ``run``'s pipeline lane beside the agent; when a person stops the run (a Stop button in the chat or on
    the live page: a ``stop`` unit), cancel the agent's task. Returns the stop unit, or None when the run ended
    otherwise. The sidecar has already ended the run ``cancelled``; the agent's later lines would get a 409."""
    async for unit in relay.pipeline(run):
        if isinstance(unit, StopUnit):
            agent.cancel()
            return unit
    return None


if __name__ == "__main__":
    asyncio.run(
        main(
            os.environ.get("STREAMRELAY_URL", "http://127.0.0.1:8787"),
            os.environ.get("STREAMRELAY_TOKEN", "dev-token"),
            os.environ.get("CHAT_ID", "1001"),
        )
    )
