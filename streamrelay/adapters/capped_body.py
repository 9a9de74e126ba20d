"""A request body read up to a limit: the routes that must read a body before they can tell who sent it.

The live page's decision (``POST /v1/runs/{run}/live/approvals/{id}``: the viewer its token is checked against is in
the body) and the WhatsApp status webhook (``POST /v1/platforms/whatsapp/webhook``: the signature covers the body)
answer anyone who can reach them; Starlette's ``request.body()`` keeps every byte sent in memory before the route
sees a length (a 500 MB body held 1.1 GB of RSS). :func:`read_capped` stops at the limit instead: a declared
``Content-Length`` past it is refused before a byte is waited for, a chunked body as soon as it passes it.
"""

from __future__ import annotations

from starlette.requests import Request


async def read_capped(request: Request, limit: int) -> bytes | None:
    """The body of ``request`` (bytes), or None when it is over ``limit`` bytes (the caller answers 413; the rest
    of the body is not read)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    pieces: list[bytes] = []
    total = 0
    async for piece in request.stream():
        total += len(piece)
        if total > limit:
            return None
        pieces.append(piece)
    return b"".join(pieces)
