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
from aiogram.types import CallbackQuery, MessageGenerationStopped

STOP_PREFIX = "stop:"
"""How the sidecar's Stop buttons' ``callback_data`` starts (core/run/stop_controls.py)."""
STOP_DATA = r"^stop:[0-9a-f]{16}$"
"""The whole ``callback_data`` of a Stop button the sidecar made: ``stop:`` and 16 lowercase hex characters. Only
such a callback is forwarded: another button of the bot whose data merely starts with ``stop:`` (``stop:t1``), or
data crafted by a client, would otherwise name a run by its plain id (``POST /v1/runs/t1/stop`` stops run ``t1``
in any chat) or put ``/`` and ``..`` into the URL's path. Other callbacks go on to the bot's other handlers."""


def stop_router(sidecar_url: str, ingest_token: str, *, timeout_s: float = 10.0) -> Router:
    """An aiogram router that forwards Stop presses to the sidecar at ``sidecar_url``: a Stop button's
    ``callback_query`` (answered with answerCallbackQuery) and a streamed draft's ``stopped_message_generation``
    (Bot API 10.3: the draft's own stop button, shown with ``can_stop`` when the channel streams natively).

    Args:
        sidecar_url: the sidecar's base URL (``http://127.0.0.1:8080``).
        ingest_token: the ingest bearer token (the same the agent streams with; never logged here).
        timeout_s: how long one forward may take (seconds).
    """
    router = Router(name="streamrelay-stop")

    async def forward(run: str, by: str) -> int | None:
        """POST the stop; the answer's status, or None when the sidecar could not be reached."""
        try:
            async with httpx.AsyncClient(timeout=timeout_s) as client:
                answer = await client.post(
                    f"{sidecar_url.rstrip('/')}/v1/runs/{run}/stop",
                    json={"by": by, "reason": "pressed Stop"},
                    headers={"Authorization": f"Bearer {ingest_token}"},
                )
        except httpx.HTTPError:
            return None
        return answer.status_code

    @router.callback_query(F.data.regexp(STOP_DATA))
    async def on_stop(query: CallbackQuery) -> None:
        status = await forward((query.data or "").removeprefix(STOP_PREFIX), f"telegram:user:{query.from_user.id}")
        if status == 200:
            await query.answer("Stopped.")
        elif status == 409:  # it ended meanwhile
            await query.answer("This answer has already ended.")
        else:
            await query.answer("The answer could not be stopped: press again.", show_alert=True)

    @router.stopped_message_generation()
    async def on_draft_stopped(stopped: MessageGenerationStopped) -> None:
        await forward(f"draft:{stopped.chat.id}:{stopped.draft_id}", f"telegram:chat:{stopped.chat.id}")

    return router
