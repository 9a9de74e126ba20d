"""aiogram's response models, built once and kept.

aiogram reads every answer as ``Response[method.__returning__]`` (aiogram/client/session/base.py ``check_response``),
and pydantic keeps a parametrized model only in a weak cache (pydantic/_internal/_generics.py
``_GENERIC_TYPES_CACHE``): each garbage collection that found no answer alive dropped it, and the next call built it
again (~0.3 ms: a whole schema build). With 1,000 runs streaming that was 5% of the sidecar's CPU (py-spy on
bench/bench_load.py). Holding them here keeps them in the cache for the process's life.
"""

from __future__ import annotations

from aiogram import methods
from aiogram.methods.base import Response
from pydantic import BaseModel

METHODS = (
    "DeleteMessage",
    "EditMessageCaption",
    "EditMessageReplyMarkup",
    "EditMessageText",
    "SendAudio",
    "SendChatAction",
    "SendDocument",
    "SendMessage",
    "SendMessageDraft",
    "SendPhoto",
    "SendVideo",
)
"""The Bot API methods the adapter calls (aiogram's class names)."""
RESPONSE_MODELS: tuple[type[BaseModel], ...] = tuple(
    Response[getattr(methods, name).__returning__]  # type: ignore[misc]
    for name in METHODS
)
"""The response model of every method the adapter calls."""
