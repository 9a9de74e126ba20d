"""DeepSeek-R1 served without a reasoning parser: the chat template opened ``<think>``, so the model streams its
reasoning, then ``</think>`` with no opener, then the answer (issue 26, item 9; open-webui#9808, DeepSeek-R1#352,
llama.cpp#11861). The rule that tells such a message (:func:`core.text.think.opened_by_template`); the committed
answer is what follows the closer (tests/integration/test_stream_reported.py replays it through the sidecar)."""

from __future__ import annotations

import asyncio

import pytest

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.events import DeliveryMode
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.core.text.think import OPENED_BY_TEMPLATE_CHARS, opened_by_template
from streamrelay.core.text.visible import visible_final
from tests.unit.fakes import MemoryChat

R1 = "Okay, the user asks for r's.\nThree of them.\n</think>\n\nThere are **3** r's."


@pytest.mark.parametrize(
    ("text", "opened"),
    [
        (R1, True),
        ("</think>\n\nYes.", True),  # nothing thought
        ("Hmm.\n</THINK>Yes.", True),  # tags are ASCII case-insensitive
        ("Hmm.\n</thinking>Yes.", True),
        ("Use </think> to close a block.", False),  # mid-line: prose about the tag
        ("<think>a</think>b", False),  # an opener came first: the usual split
        ("a\n<final>b</final>\n</think>", False),  # the first tag is not a closer
        ("x\n</final>", False),
        ("a\n</thinkx>", False),  # a look-alike
        ("x" * OPENED_BY_TEMPLATE_CHARS + "\n</think>y", False),  # past the first 32k characters
    ],
)
def test_the_rule(text: str, opened: bool) -> None:
    assert opened_by_template(text) is opened


def test_read_as_opened_the_answer_is_what_follows_the_closer() -> None:
    assert visible_final(R1, opened=True) == "There are **3** r's."


async def _committed(deltas: list[str | dict[str, object]], end: dict[str, object]) -> list[str]:
    chat = MemoryChat()
    channel = ChannelPolicy(name="c", throttle_s=0, delivery=DeliveryMode.FINAL)
    relay = Relay({"c": ChannelRuntime(channel, chat)}, MemoryLedger(), MonotonicClock())
    await relay.submit_line({"kind": "run.start", "channel": "c", "target": {"chat_id": 5}}, "r")
    lines = [{"kind": "text", "text": d} if isinstance(d, str) else {"kind": "text", **d} for d in deltas]
    await relay.submit_lines([(line, None) for line in lines], "r")
    await relay.submit_line({"kind": "end", **end}, "r")
    await relay.wait_done("r", 10)
    await relay.close()
    return list(chat.messages.values())


@pytest.mark.parametrize("cut", [1, 10, 30, 45, 47, 60])
def test_the_committed_answer_of_r1_output_is_what_follows_the_closer(cut: int) -> None:
    assert asyncio.run(_committed([R1[:cut], R1[cut:]], {})) == ["There are **3** r's."]


def test_a_final_text_is_read_by_the_same_rule_and_prose_about_the_tag_is_kept() -> None:
    assert asyncio.run(_committed(["x"], {"final_text": R1})) == ["There are **3** r's."]
    prose = "Close the block with </think> and then\nwrite the answer."
    assert asyncio.run(_committed([prose], {})) == [prose]


def test_each_message_is_read_alone() -> None:
    """A plain first message keeps its text; the R1-shaped second one gives only its answer."""
    deltas: list[str | dict[str, object]] = ["First answer.", {"text": R1, "message": 1}]
    assert asyncio.run(_committed(deltas, {})) == ["First answer.\n\nThere are **3** r's."]
