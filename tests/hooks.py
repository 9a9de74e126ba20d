"""A webhook receiver for tests: an aiohttp app on 127.0.0.1 with one POST route, as an app's server takes what a
platform (a mock) posts to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web


@asynccontextmanager
async def serve_hook(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]], path: str = "/hook"
) -> AsyncIterator[str]:
    """Serve ``handler`` at ``path`` on a port of its own (port 0) while the block runs; yields its URL."""
    app = web.Application()
    app.router.add_post(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}{path}"
    finally:
        await runner.cleanup()
