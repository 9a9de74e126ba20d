"""A real sidecar for the fuzz suite: uvicorn, the relay, a SQLite journal and ledger, the web channel and the mock
Bot API, all in an event loop of their own on a background thread (as in production, the server's loop is not the
client's: a handler that blocks its loop shows up as a client timeout, never as a stuck test).

The tests talk to it over loopback HTTP with a blocking :class:`httpx.Client` whose timeouts are the hang guard.
Hypothesis runs every example against the same server (one per test module), so the settings here are fixed:
``derandomize=True`` makes CI reproducible, no example database, no deadline (HTTP round trips vary).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import pytest
from hypothesis import HealthCheck, settings
from pydantic import SecretStr

from streamrelay.adapters.sqlite import SqliteJournal, SqliteLedger, SqliteStore
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.telegram import MockTelegram
from tests.contention import wait_scale

T = TypeVar("T")

BOT_TOKEN = "123456:FUZZ-test-token"
INGEST_TOKEN = "ingest-secret-for-fuzz"
AUTH = {"Authorization": f"Bearer {INGEST_TOKEN}"}
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_LINE_BYTES = 64 * 1024
HANG_GUARD_S = 10.0
"""No request may take longer than this on an idle machine (httpx's connect / read / write timeouts)."""
START_TIMEOUT_S = 30.0
"""The stack's start on an idle machine (scaled by the load: :func:`tests.contention.wait_scale`; at load 20 on 2 cores
it took over 30 s)."""


FUZZ_SCALE = float(os.environ.get("STREAMRELAY_FUZZ_SCALE", "1"))
"""Scales every fuzz test's examples (e.g. ``STREAMRELAY_FUZZ_SCALE=10`` for a long run before a release)."""


def fuzz_settings(max_examples: int) -> settings:
    """Hypothesis settings for one fuzz test: reproducible (derandomized, no database), no deadline; the examples
    scaled by :data:`FUZZ_SCALE`."""
    return settings(
        max_examples=max(1, round(max_examples * FUZZ_SCALE)),
        deadline=None,
        derandomize=True,
        database=None,
        print_blob=True,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.function_scoped_fixture,
        ],
    )


class FuzzStack:
    """The mock Bot API, a relay (``telegram`` and ``web`` channels) over SQLite, and the sidecar, on their own loop.

    Args:
        db_path: the SQLite file of the journal and the ledger (one store, as ``streamrelay serve`` has it).
    """

    def __init__(self, db_path: Path) -> None:
        self._db_path = db_path
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fuzz-sidecar", daemon=True)
        self.mock = MockTelegram()
        self.url = ""
        self._relay: Relay | None = None
        self._sidecar: Sidecar | None = None
        self._store: SqliteStore | None = None

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float = START_TIMEOUT_S) -> T:
        """Run ``coro`` on the stack's loop and wait for its result (at most ``timeout_s``)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def start(self) -> None:
        self._thread.start()
        self.url = self.call(self._start(), START_TIMEOUT_S * wait_scale())  # a hang guard, scaled as timeouts are

    async def _start(self) -> str:
        api = await self.mock.start()
        self._store = await SqliteStore.open(self._db_path)
        ledger = await SqliteLedger.on(self._store)
        journal = await SqliteJournal.on(self._store)
        telegram = ChannelSettings.model_validate({"platform": "telegram", "api_base": api, "throttle_ms": 0})
        web = ChannelSettings.model_validate({"platform": "web", "throttle_ms": 0})
        channels = {
            "telegram": make_runtime("telegram", telegram, SecretStr(BOT_TOKEN)),
            "web": make_runtime("web", web, SecretStr("")),
        }
        self._relay = Relay(channels, ledger, MonotonicClock(), journal=journal, gap_timeout_s=0.1)
        self._sidecar = Sidecar(
            self._relay,
            token=INGEST_TOKEN,
            max_body_bytes=MAX_BODY_BYTES,
            max_line_bytes=MAX_LINE_BYTES,
            signals=False,
        )
        return await self._sidecar.start()

    def visible(self, chat_id: int) -> list[str]:
        """The texts a person sees in the mock chat ``chat_id``, oldest first (read on the stack's loop)."""

        async def read() -> list[str]:
            return [text for _, text in self.mock.visible(chat_id)]

        return self.call(read())

    def stop(self) -> None:
        try:
            self.call(self._stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(START_TIMEOUT_S)
            self.loop.close()

    async def _stop(self) -> None:
        if self._sidecar is not None:
            await self._sidecar.stop()
        if self._relay is not None:
            await self._relay.close()
        if self._store is not None:
            await self._store.close()
        await self.mock.stop()


def client(url: str) -> httpx.Client:
    """A blocking client of the sidecar with the ingest token; every request gives up after the hang guard
    (:data:`HANG_GUARD_S`, scaled by the load when the client is made: :func:`tests.contention.wait_scale`)."""
    return httpx.Client(base_url=url, headers=AUTH, timeout=httpx.Timeout(HANG_GUARD_S * wait_scale()))


@pytest.fixture(scope="module")
def fuzz_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzStack]:
    """One real sidecar for the test module."""
    stack = FuzzStack(tmp_path_factory.mktemp("fuzz") / "streamrelay.db")
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def http(fuzz_stack: FuzzStack) -> Iterator[httpx.Client]:
    """A client of the module's sidecar."""
    with client(fuzz_stack.url) as session:
        yield session


if TYPE_CHECKING:
    from tests.fuzz.victim import Victim


FUZZ_MARKS = [
    pytest.mark.timeout(240),
    # A failing example of a huge line would be printed whole: hypothesis warns, and warnings are errors here.
    pytest.mark.filterwarnings("ignore:Generating overly large repr:hypothesis.errors.HypothesisWarning"),
]
"""The marks of every ingest fuzz module (``pytestmark = FUZZ_MARKS``)."""


@pytest.fixture(scope="module")
def victim(fuzz_stack: FuzzStack) -> Iterator[Victim]:
    """The well-behaved run streaming beside the module's fuzzing (checked by the module's last test)."""
    from tests.fuzz.victim import streaming_beside  # victim.py reads this module's FuzzStack and client

    yield from streaming_beside(fuzz_stack)
