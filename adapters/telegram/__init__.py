"""Telegram channel adapter (aiogram 3): :class:`TelegramAdapter`."""

from adapters.telegram.adapter import TelegramAdapter

__all__ = ["TelegramAdapter"]
