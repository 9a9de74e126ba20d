"""The few lines a Telegram bot needs to make the sidecar's Approve and Deny buttons work (aiogram 3;
docs/approvals.md).

An agent's ``approval.request`` becomes a message with two buttons whose ``callback_data`` is
``approve:<run16>:<id16>`` or ``deny:<run16>:<id16>``. The press goes to the bot that owns the chat's updates (the
sidecar never polls them); the bot forwards it to ``POST /v1/runs/<run16>/approvals/<id16>`` with who pressed, and
answers the callback with what the sidecar said (answerCallbackQuery ``text``,
https://core.telegram.org/bots/api#answercallbackquery): a person who may not decide is told so, and nothing
changes::

    from aiogram import Dispatcher
    from examples.approval_bot import approval_router

    dp = Dispatcher()
    dp.include_router(approval_router("http://127.0.0.1:8080", os.environ["STREAMRELAY_TOKEN"]))
"""

from __future__ import annotations

import re

import httpx
from aiogram import F, Router
from aiogram.types import CallbackQuery

APPROVAL_DATA = r"^(approve|deny):([0-9a-f]{16}):([0-9a-f]{16})$"
"""The whole ``callback_data`` of an approval button the sidecar made (core/run/approvals.py). Only such a callback
is forwarded: other data would put arbitrary text into the URL's path."""


def approval_router(sidecar_url: str, ingest_token: str, *, timeout_s: float = 10.0) -> Router:
    """An aiogram router that forwards Approve and Deny presses to the sidecar at ``sidecar_url`` and answers each
    ``callback_query`` with the outcome (the sidecar's ``tell`` for a refused press).

    Args:
        sidecar_url: the sidecar's base URL (``http://127.0.0.1:8080``).
        ingest_token: the ingest bearer token (never logged here).
        timeout_s: how long one forward may take (seconds).
    """
    router = Router(name="streamrelay-approvals")

    @router.callback_query(F.data.regexp(APPROVAL_DATA))
    async def on_press(query: CallbackQuery) -> None:
        match = re.fullmatch(APPROVAL_DATA, query.data or "")
        assert match is not None  # the filter matched it
        decision, run, approval = match.groups()
        try:
            async with httpx.AsyncClient(timeout=timeout_s) as client:
                answer = await client.post(
                    f"{sidecar_url.rstrip('/')}/v1/runs/{run}/approvals/{approval}",
                    json={"decision": decision, "by": f"telegram:user:{query.from_user.id}"},
                    headers={"Authorization": f"Bearer {ingest_token}"},
                )
        except httpx.HTTPError:
            await query.answer("The sidecar could not be reached: press again.", show_alert=True)
            return
        body = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else {}
        if answer.status_code == 200:
            await query.answer("Approved." if body.get("approved") else "Denied.")
        elif answer.status_code in (403, 409):
            await query.answer(str(body.get("tell") or body.get("error"))[:200], show_alert=answer.status_code == 403)
        else:
            await query.answer("The decision could not be recorded: press again.", show_alert=True)

    return router
