"""Mock platform servers (real HTTP on loopback) that tests, scenario cases and dry runs talk to."""

from streamrelay.mocks.telegram import MockTelegram, RecordedCall, StoredMessage, TelegramLimits

__all__ = ["MockTelegram", "RecordedCall", "StoredMessage", "TelegramLimits"]
