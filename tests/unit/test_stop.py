"""core/run/stop.py and core/run/stop_controls.py alone: the stop's report line round-trips, a stop body is checked, the
control ids fit every platform's limit."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from streamrelay.config.settings import ChannelSettings
from streamrelay.core.errors import IngestError
from streamrelay.core.events import Stop
from streamrelay.core.lanes.pipeline import PipelineLane
from streamrelay.core.run.stop import BY_PATTERN, _who, is_stop_note, parse_stop_body, stop_note, stop_unit
from streamrelay.core.run.stop_controls import control_id, draft_control_id, is_short_id, short_id

BY = st.from_regex(BY_PATTERN, fullmatch=True)
REASON = st.text(max_size=500).filter(lambda text: text.strip() == text and text != "")


@given(by=st.none() | BY, reason=st.none() | REASON)
def test_a_stop_note_names_who_and_why_and_reads_back(by: str | None, reason: str | None) -> None:
    note = stop_note(Stop(run="r", by=by, reason=reason))
    assert is_stop_note(note)
    assert _who(note) == (by, reason)


def test_the_stop_unit_shape() -> None:
    lane = PipelineLane("r")
    unit = lane.emit(stop_unit(Stop(run="r", by="web", reason="too long")))
    assert unit.model_dump(mode="json") == {
        "index": 1,
        "kind": "stop",
        "run": "r",
        "by": "web",
        "reason": "too long",
        "source": None,
    }


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ([], "must be a JSON object"),
        ({"who": "x"}, "unknown field 'who'"),
        ({"by": "a person (me)"}, "by must name who stopped the run"),
        ({"by": 3}, "by must name who stopped the run"),
        ({"reason": "x" * 501}, "reason must be a string of at most 500"),
    ],
)
def test_a_bad_stop_body_says_what_is_wrong(body: object, error: str) -> None:
    with pytest.raises(IngestError) as refused:
        parse_stop_body(body)
    assert error in str(refused.value) and refused.value.status == 400


def test_a_good_stop_body() -> None:
    assert parse_stop_body(None) == (None, None)
    assert parse_stop_body({"by": "slack:user:U0PRESSER", "reason": ""}) == ("slack:user:U0PRESSER", None)


@given(st.text(min_size=1, max_size=300))
def test_control_ids_fit_every_platform(run_key: str) -> None:
    control = control_id(run_key)
    assert len(control.encode()) <= 64  # Telegram callback_data 1-64 bytes; Discord custom_id 100; Slack 255
    assert control.startswith("stop:") and is_short_id(control.removeprefix("stop:"))
    assert short_id(run_key) == control.removeprefix("stop:")  # the same run, the same id (after a restart too)
    # the id never carries the run key (a key of a few characters may be in "stop:" or match hex digits by chance)
    assert run_key not in control.removeprefix("stop:") or len(run_key) < 6


def test_a_draft_is_named_by_its_chat_and_id() -> None:
    assert draft_control_id(5, "123") == "draft:5:123"
    assert not is_short_id("draft:5:123") and not is_short_id("0123456789ABCDEF")


@pytest.mark.parametrize(
    ("channel", "error"),
    [
        ({"platform": "web"}, "the live page's Stop comes with its link"),
        ({"platform": "telegram", "delivery": "final"}, "delivery 'final' shows nothing before the end"),
    ],
)
def test_stop_button_where_no_message_could_carry_it_is_a_config_error(channel: dict[str, str], error: str) -> None:
    with pytest.raises(ValidationError) as refused:
        ChannelSettings.model_validate({**channel, "stop_button": True})
    assert error in str(refused.value)
    assert ChannelSettings.model_validate({**channel, "stop_button": False}).stop_button is False
