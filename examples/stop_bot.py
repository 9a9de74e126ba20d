"""The few lines a Telegram bot needs to make the sidecar's Stop button work (aiogram 3).

The sidecar puts a Stop button on a run's live message when its channel says ``stop_button = true``; the click
goes to the bot that owns the chat's updates (the sidecar never polls them), as a ``callback_query`` whose
``data`` is ``stop:<16 hex>``. The bot forwards it to ``POST /v1/runs/<16 hex>/stop`` and answers the callback
(answerCallbackQuery: https://core.telegram.org/bots/api#answercallbackquery), so the person's client stops its
spinner and shows what happened::

    from aiogram import Dispatcher
    from examples.stop_bot import stop_router

    dp = Dispatcher()
    dp.include_router(stop_router("http://127.0.0.1:8080", os.environ["STREAMRELAY_TOKEN"]))

The run then ends ``cancelled`` (the answer so far stays, "⏹ Stopped." follows, the button goes) and the parent
loop reads a ``stop`` unit on its pipeline lane (examples/parent_loop.py).
"""

from __future__ import annotations

import httpx
from aiogram import F, Router
from aiogram.types import CallbackQuery

STOP_PREFIX = "stop:"
"""How the sidecar's Stop buttons' ``callback_data`` starts (core/stop_controls.py)."""


def stop_router(sidecar_url: str, ingest_token: str, *, timeout_s: float = 10.0) -> Router:
    """An aiogram router that forwards Stop clicks to the sidecar at ``sidecar_url`` and answers them.

    Args:
        sidecar_url: the sidecar's base URL (``http://127.0.0.1:8080``).
        ingest_token: the ingest bearer token (the same the agent streams with; never logged here).
        timeout_s: how long one forward may take (seconds).
    """
    router = Router(name="streamrelay-stop")

    @router.callback_query(F.data.startswith(STOP_PREFIX))
    async def on_stop(query: CallbackQuery) -> None:
        control = (query.data or "").removeprefix(STOP_PREFIX)
        body = {"by": f"telegram:user:{query.from_user.id}", "reason": "pressed Stop"}
        try:
            async with httpx.AsyncClient(timeout=timeout_s) as client:
                answer = await client.post(
                    f"{sidecar_url.rstrip('/')}/v1/runs/{control}/stop",
                    json=body,
                    headers={"Authorization": f"Bearer {ingest_token}"},
                )
        except httpx.HTTPError:
            await query.answer("The answer could not be stopped right now: press again.", show_alert=True)
            return
        if answer.status_code == 200:
            await query.answer("Stopped.")
        elif answer.status_code == 409:  # it ended meanwhile (or was stopped before)
            await query.answer("This answer has already ended.")
        else:
            await query.answer("The answer could not be stopped: press again.", show_alert=True)

    return router
