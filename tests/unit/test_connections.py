"""The pure parts of the connection limits: admission counts, the fixed answers, the settings, the log filter,
fitting ``max_connections`` to the open-file limit."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import re
from pathlib import Path

import pytest

from streamrelay.adapters.ingest_http.connections import CloseReason, ConnectionGuard, ConnectionLimits
from streamrelay.adapters.ingest_http.flood import (
    RateLimitFilter,
    connection_ceiling,
    fit_to_open_files,
    install_flood_filters,
)
from streamrelay.app.connections import connection_limits
from streamrelay.config.connections import ConnectionSettings
from streamrelay.config.settings import DEFAULT_CONFIG, load_settings
from streamrelay.core.errors import ConfigError


def _limits(**changes: float) -> ConnectionLimits:
    base = ConnectionSettings().model_dump() | changes
    return ConnectionLimits(**base)


def test_a_guard_refuses_past_each_cap_and_counts_what_leaves() -> None:
    guard = ConnectionGuard(_limits(max_connections=3, max_connections_per_peer=2))
    assert [guard.admit("10.0.0.1") for _ in range(3)] == [None, None, CloseReason.MAX_CONNECTIONS_PER_PEER]
    assert guard.admit("10.0.0.2") is None
    assert guard.admit("10.0.0.3") is CloseReason.MAX_CONNECTIONS
    assert guard.count() == 3 and guard.per_peer == {"10.0.0.1": 2, "10.0.0.2": 1}
    guard.release("10.0.0.1")
    guard.release("10.0.0.2")
    assert guard.per_peer == {"10.0.0.1": 1} and guard.admit("10.0.0.3") is None


def test_the_fixed_answers_name_the_limit_and_its_setting() -> None:
    guard = ConnectionGuard(_limits(max_connections_per_peer=5, header_timeout_s=1.5))
    refused = guard.answers[CloseReason.MAX_CONNECTIONS_PER_PEER]
    head, _, body = refused.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 ") and b"Connection: close" in head
    assert int(re.search(rb"Content-Length: (\d+)", head)[1]) == len(body)  # type: ignore[index]
    assert json.loads(body) == {
        "error": "too many connections from your address: service.connections.max_connections_per_peer (5) reached",
        "limit": "max_connections_per_peer",
        "setting": "service.connections.max_connections_per_peer",
    }
    late = json.loads(guard.answers[CloseReason.HEADER_TIMEOUT].partition(b"\r\n\r\n")[2])
    assert late["setting"] == "service.connections.header_timeout_s" and "1.5 s" in late["error"]
    assert CloseReason.BODY_IDLE_TIMEOUT.setting == "service.connections.body_idle_timeout_s"


def test_the_settings_have_generous_defaults_and_refuse_unknown_keys(tmp_path: Path) -> None:
    defaults = load_settings(DEFAULT_CONFIG).service.connections
    assert defaults == ConnectionSettings()
    assert defaults.body_idle_timeout_s >= 120 and defaults.max_connections_per_peer >= 256
    path = tmp_path / "channels.toml"
    path.write_text("[service.connections]\nheader_timeout_s = 3\nmax_connections = 50\n", encoding="utf-8")
    connections = load_settings(path).service.connections
    assert connections.header_timeout_s == 3 and connections.max_connections == 50
    path.write_text("[service.connections]\nheader_timeout = 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="header_timeout"):
        load_settings(path)


def test_the_shipped_file_documents_every_key() -> None:
    text = DEFAULT_CONFIG.read_text(encoding="utf-8")
    assert "# [service.connections]" in text
    for key in ConnectionSettings.model_fields:
        assert f"# {key} = " in text, key


def test_max_connections_is_fitted_below_the_open_file_limit(caplog: pytest.LogCaptureFixture) -> None:
    limits = _limits(max_connections=2048, max_connections_per_peer=512)
    assert fit_to_open_files(limits, None) is limits
    assert fit_to_open_files(limits, 100_000) is limits
    with caplog.at_level(logging.WARNING, "streamrelay.connections"):
        fitted = fit_to_open_files(limits, 1024)
    assert fitted.max_connections == connection_ceiling(1024) < 1024 and fitted.max_connections_per_peer == 512
    assert "service.connections.max_connections lowered from 2048" in caplog.text
    assert fit_to_open_files(limits, 300).max_connections_per_peer == connection_ceiling(300)
    assert connection_ceiling(10) == 1


def test_connection_limits_are_the_settings_fitted_to_this_process() -> None:
    limits = connection_limits(ConnectionSettings(header_timeout_s=2, max_connections=10, max_connections_per_peer=4))
    assert (limits.header_timeout_s, limits.max_connections, limits.max_connections_per_peer) == (2, 10, 4)


def _record(message: str) -> logging.LogRecord:
    return logging.LogRecord("uvicorn.error", logging.WARNING, __file__, 1, message, None, None)


def test_the_filter_lets_one_record_of_a_kind_through_per_period_and_counts_the_rest() -> None:
    now = [0.0]
    flt = RateLimitFilter(["Invalid HTTP request received."], period_s=10, clock=lambda: now[0])
    assert flt.filter(_record("Invalid HTTP request received."))
    assert not any(flt.filter(_record("Invalid HTTP request received.")) for _ in range(500))
    assert flt.filter(_record("Exception in ASGI application"))  # another kind: untouched
    now[0] = 10.0
    record = _record("Invalid HTTP request received.")
    assert flt.filter(record)
    assert record.getMessage() == "Invalid HTTP request received. (500 more like it since the last one were not logged)"
    now[0] = 25.0
    quiet = _record("Invalid HTTP request received.")
    assert flt.filter(quiet) and quiet.getMessage() == "Invalid HTTP request received."


async def test_asyncios_accept_errors_are_rate_limited_once_installed(caplog: pytest.LogCaptureFixture) -> None:
    install_flood_filters()
    install_flood_filters()  # once per process: a second call adds nothing
    assert sum(isinstance(f, RateLimitFilter) for f in logging.getLogger("asyncio").filters) == 1
    loop = asyncio.get_running_loop()
    with caplog.at_level(logging.ERROR, "asyncio"):
        for _ in range(200):  # what the accept loop reports on EMFILE, once per retry
            error = OSError(errno.EMFILE, "Too many open files")
            loop.call_exception_handler({"message": "socket.accept() out of system resource", "exception": error})
    assert len([r for r in caplog.records if r.name == "asyncio"]) <= 1
