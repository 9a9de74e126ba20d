"""Fixtures for the browser tests: a sidecar with a ``web`` channel on 127.0.0.1, and Debian's Chromium driven
headless by Playwright (its ``executable_path``: Playwright never downloads a browser here).

Without a ``chromium`` (or ``chromium-browser``) on PATH the browser tests skip, so ``uv run pytest`` works on a
machine that has only Python and uv; with ``STREAMRELAY_REQUIRE_BROWSER=1`` (CI: ``.ci/run`` installs Chromium)
they fail instead.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, ConsoleMessage, Page, async_playwright
from pydantic import SecretStr

from streamrelay.app.client import RelayClient
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.corrections import Corrections
from streamrelay.core.run.desk import Desk
from streamrelay.core.run.relay import Relay
from tests.contention import timeout_scale, wait_scale

INGEST_TOKEN = "browser-tests-ingest-secret"
NO_CHROMIUM = "no Chromium on PATH: install Debian's chromium: apt-get install chromium"
IDLE_WAIT_MS = 15_000
WAIT_MS = round(IDLE_WAIT_MS * timeout_scale())
"""Playwright's timeout for one wait (a reconnect takes about 3 s: the EventSource's own retry delay), 15 s on an
idle machine, scaled by its contention (:func:`tests.contention.timeout_scale`: Chromium renders N times slower on
a machine running N times more work than it has cores). A page's own default is scaled again by the load when it
opens (:func:`tests.contention.wait_scale`: a worker started at load 3 ran a page at load 30, whose 24 s wait for
the end of a 4,000-character answer ran out)."""
POLL_S = 0.05


def chromium_path() -> str:
    """Debian's Chromium; skips the test without one (fails with ``STREAMRELAY_REQUIRE_BROWSER=1``)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("STREAMRELAY_REQUIRE_BROWSER") == "1":
            pytest.fail(NO_CHROMIUM, pytrace=False)
        pytest.skip(NO_CHROMIUM)
    return path


class WebStack:
    """A relay with a ``web`` channel (and ``web-anyone``, whose approvals anyone may decide:
    ``approvals_anyone = true``) and its sidecar, which a test may stop and start again on the same port (the same
    ingest token, so the same read tokens: the page's link stays valid)."""

    def __init__(self, live_buffer: int) -> None:
        channel = ChannelSettings.model_validate({"platform": "web", "throttle_ms": 50})
        runtime = make_runtime("web", channel, SecretStr(""))
        anyone = ChannelSettings.model_validate({"platform": "web", "throttle_ms": 50, "approvals_anyone": True})
        runtimes = {"web": runtime, "web-anyone": make_runtime("web-anyone", anyone, SecretStr(""))}
        self.ledger = MemoryLedger()
        self.relay = Relay(runtimes, self.ledger, MonotonicClock(), live_buffer=live_buffer)
        self.desk = Desk(self.ledger, self.ledger, self.relay.channels, MonotonicClock())
        self.corrections = Corrections(
            self.ledger, self.ledger, self.relay.channels, MonotonicClock(), shown=self.relay.corrected
        )
        self.sidecar = Sidecar(self.relay, token=INGEST_TOKEN, desk=self.desk, corrections=self.corrections)
        self.port = 0

    async def start_sidecar(self) -> None:
        """Start a sidecar for the relay (the first one picks a free port; later ones reuse it)."""
        self.sidecar = Sidecar(
            self.relay, token=INGEST_TOKEN, port=self.port, desk=self.desk, corrections=self.corrections
        )
        await self.sidecar.start()
        self.port = self.sidecar.port

    async def stop_sidecar(self) -> None:
        """Stop the sidecar (open streams are cut within ``SHUTDOWN_GRACE_S``); the relay and its runs stay."""
        await self.sidecar.stop()

    def client(self) -> RelayClient:
        """A new HTTP client of the current sidecar (a client of a stopped one holds dead connections)."""
        return RelayClient(self.sidecar.url, INGEST_TOKEN)

    async def submit(self, run: str, events: Iterable[Mapping[str, Any]]) -> None:
        """Events straight into the relay (while no sidecar is serving)."""
        for event in events:
            await self.relay.submit_line(dict(event), run)


class LivePage:
    """A browser page on a run's live page, with what a person sees and the page's test contract
    (``document.body.dataset.state``, ``window.streamrelayView``)."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.problems: list[str] = []
        page.on("pageerror", lambda error: self.problems.append(f"script error: {error}"))
        page.on("console", self._console)

    def _console(self, message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            self.problems.append(f"CSP: {message.text}")

    async def state(self) -> str:
        value = await self.page.evaluate("document.body.dataset.state")
        return str(value)

    async def wait_state(self, state: str) -> None:
        await self.page.wait_for_selector(f'body[data-state="{state}"]', state="attached")

    async def view(self) -> dict[str, int]:
        """``window.streamrelayView``: ``lastId``, ``eventsApplied``, ``resets``, ``ignored``."""
        value: dict[str, int] = await self.page.evaluate("({...window.streamrelayView})")
        return value

    async def text(self, selector: str) -> str:
        """The text of one element, as the DOM holds it (no layout: exact whitespace)."""
        return await self.page.locator(selector).text_content() or ""

    async def texts(self, selector: str) -> list[str]:
        return [text or "" for text in await self.page.locator(selector).all_text_contents()]

    async def wait_text(self, selector: str, ready: Callable[[str], object], timeout_s: float = WAIT_MS / 1000) -> str:
        """Poll ``selector``'s text until ``ready(text)`` (polled from here: the page's CSP forbids eval)."""
        async with asyncio.timeout(timeout_s):
            while not ready(text := await self.text(selector)):
                await asyncio.sleep(POLL_S)
        return text

    async def snapshot(self, path: Path) -> Path:
        """A full-page screenshot at ``path``; also checks the page had no script error or CSP violation."""
        await self.page.screenshot(path=path, full_page=True)
        assert path.is_file() and path.stat().st_size > 0
        assert self.problems == []
        return path


@pytest.fixture(autouse=True)
def chromium() -> str:
    """Checked first, before any server starts."""
    return chromium_path()


@pytest.fixture
def live_buffer() -> int:
    """The relay's replay buffer per run (parametrize a test on ``live_buffer`` to change it)."""
    return 1000


@pytest.fixture
async def web(live_buffer: int) -> AsyncIterator[WebStack]:
    stack = WebStack(live_buffer)
    await stack.start_sidecar()
    try:
        yield stack
    finally:
        await stack.stop_sidecar()
        await stack.relay.close()


@pytest.fixture
async def browser(chromium: str) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=chromium, headless=True)
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def live(web: WebStack, browser: Browser) -> AsyncIterator[LivePage]:
    """A fresh page (1280x900) in its own context; closed before the sidecar stops (no stream holds it open)."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(max(WAIT_MS, round(IDLE_WAIT_MS * wait_scale())))
    try:
        yield LivePage(await context.new_page())
    finally:
        await context.close()
