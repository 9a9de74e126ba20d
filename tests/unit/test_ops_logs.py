"""The logging setup: stdlib records (ours and libraries') rendered by structlog as JSON lines or console lines, with
their extra fields, the run of the task that logged, and no secret in any form."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from streamrelay.adapters.ops.logs import LoggingSetup, configure_logging
from streamrelay.adapters.ops.redact import REDACTED

BOT_TOKEN = "123456789:AAE-mock_Secret-Token_0123456789abcdef"


class Captured:
    def __init__(self) -> None:
        self.stream = io.StringIO()
        self.setup: LoggingSetup | None = None

    def configure(self, fmt: Any = "json", level: str = "info", secrets: tuple[str, ...] = ()) -> LoggingSetup:
        if self.setup is not None:
            self.setup.close()
        self.setup = configure_logging(fmt, level, secrets=secrets, stream=self.stream)
        return self.setup

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stream.getvalue().splitlines() if line.strip()]


@pytest.fixture
def captured() -> Iterator[Captured]:
    capture = Captured()
    yield capture
    if capture.setup is not None:
        capture.setup.close()
    structlog.reset_defaults()


def test_a_stdlib_record_becomes_one_json_line_with_its_extra_fields(captured: Captured) -> None:
    captured.configure("json")
    logging.getLogger("streamrelay.calls").info(
        "%s %s %s", "telegram", "send", "ok", extra={"channel": "telegram", "method": "send", "ms": 7.5}
    )
    (line,) = captured.lines()
    assert line["event"] == "telegram send ok" and line["level"] == "info"
    assert line["logger"] == "streamrelay.calls" and line["timestamp"].endswith("Z")
    assert (line["channel"], line["method"], line["ms"]) == ("telegram", "send", 7.5)


def test_the_level_filters_and_a_library_line_comes_out_the_same_way(captured: Captured) -> None:
    captured.configure("json", "warning")
    logging.getLogger("streamrelay.delivery").info("run r1 part 0: send uncertain")
    logging.getLogger("aiohttp.client").warning("connection reset")
    assert [(line["logger"], line["event"]) for line in captured.lines()] == [("aiohttp.client", "connection reset")]


@pytest.mark.parametrize(
    ("logger", "template"),
    [
        ("sse_starlette.sse", "chunk: %s"),
        ("pywa.api", "Request: %s"),
        ("slack_sdk.web.async_internal_utils", "Sending a request - json: {'text': '%s'}"),
        ("discord.http", "POST /channels/1/messages with {'content': '%s'} has returned 200"),
    ],
)
def test_at_debug_no_library_logs_the_answer_text(captured: Captured, logger: str, template: str) -> None:
    """These libraries log each body at DEBUG: the answer's text (a person's data) never reaches the logs, while the
    sidecar's own debug lines and the library's warnings do (the breaker's finding)."""
    captured.configure("json", "debug")
    logging.getLogger(logger).debug(template, "the agent's private answer")
    logging.getLogger(logger).warning("connection reset")
    logging.getLogger("streamrelay.delivery").debug("run r1 part 0: acked")
    assert "private answer" not in captured.stream.getvalue()
    assert [line["event"] for line in captured.lines()] == ["connection reset", "run r1 part 0: acked"]


def test_a_line_logged_by_a_runs_task_names_the_run(captured: Captured) -> None:
    captured.configure("json")

    async def deliver() -> None:
        logging.getLogger("streamrelay.delivery").info("run r-7 part 0: edit retry")

    async def main() -> None:
        await asyncio.create_task(deliver(), name="reconciler:r-7")
        await asyncio.create_task(deliver(), name="sqlite-writer")

    asyncio.run(main())
    assert [line.get("run") for line in captured.lines()] == ["r-7", None]


def test_no_token_survives_in_a_message_an_extra_field_or_a_traceback(captured: Captured) -> None:
    captured.configure("json", secrets=("ingest-secret-for-tests", BOT_TOKEN))
    log = logging.getLogger("aiogram.client")
    url = f"http://127.0.0.1:8081/bot{BOT_TOKEN}/sendMessage"
    log.info("POST %s", url, extra={"headers": {"Authorization": "Bearer ingest-secret-for-tests"}})
    try:
        raise RuntimeError(f"cannot reach {url} (secret part {BOT_TOKEN.partition(':')[2]})")
    except RuntimeError:
        log.exception("the call failed")
    out = captured.stream.getvalue()
    for secret in ("ingest-secret-for-tests", BOT_TOKEN, BOT_TOKEN.partition(":")[2]):
        assert secret not in out
    first, second = captured.lines()
    assert first["event"] == f"POST http://127.0.0.1:8081/bot{REDACTED}/sendMessage"
    assert first["headers"] == {"Authorization": REDACTED}
    assert "RuntimeError: cannot reach" in second["exception"] and REDACTED in second["exception"]


def test_console_lines_are_for_people_and_redacted_too(captured: Captured) -> None:
    captured.configure("console", secrets=("ingest-secret-for-tests",))
    logging.getLogger("streamrelay.service").info("listening with ingest-secret-for-tests", extra={"url": "http://x"})
    out = captured.stream.getvalue()
    assert "listening with <redacted>" in out and "url=http://x" in out and "ingest-secret" not in out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)


def test_json_is_the_default_off_a_terminal_and_a_second_setup_replaces_the_first(captured: Captured) -> None:
    first = captured.configure(None)
    assert first.fmt == "json"
    captured.configure(None)
    ours = [h for h in logging.getLogger().handlers if getattr(h, "_streamrelay", False)]
    assert ours == [captured.setup.handler if captured.setup else None]
    logging.getLogger("streamrelay.test").warning("once")
    assert len(captured.lines()) == 1


def test_an_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match="log_level 'loud'"):
        configure_logging("json", "loud", stream=io.StringIO())
