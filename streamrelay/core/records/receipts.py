"""Status receipts: what a platform told the sidecar, after the call, about a message it stored.

Some platforms answer a create and then report the message's fate separately: the WhatsApp Cloud API posts
``statuses`` webhooks (``sent``, ``delivered``, ``read``, ``failed``) that echo the ``biz_opaque_callback_data`` the
create carried (https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/components). The sidecar puts the
create's delivery id there, so a receipt is keyed by ``(platform, delivery id)``: a create whose answer was lost (a
timeout, a reset, a kill -9 in the call) is settled by its receipt (:mod:`adapters.whatsapp.settle`).

:class:`Receipts` is the port (SQLite: :class:`adapters.sqlite.receipts.SqliteReceipts`, in the ledger's file);
:class:`MemoryReceipts` keeps them in a dict (tests, and a sidecar without a durable store). A receipt is kept at its
strongest status (:data:`STATUS_RANK`): ``sent`` after ``delivered`` changes nothing, ``failed`` after ``sent`` neither
(the message was stored; it did not reach the phone).

Retention: a receipt matters only while a send of its delivery id may still be settled, so each is kept
:data:`RECEIPTS_RETENTION_S` (``[service] receipts_retention_hours``) from when it was last recorded, then pruned
(:meth:`Receipts.prune`, every 30 s by the service; Redis expires each one by itself). A receipt holds only what
settling reads: the delivery id, the status, the ``wamid`` (the part's message id when it is ``found``), a ``failed``
status's error code and the time; never the recipient's ``recipient_id`` (their phone number) nor the conversation
or pricing objects of the webhook.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

RECEIPTS_RETENTION_S = 8 * 86_400.0
"""How long a receipt is kept after it was last recorded, by default (8 days; ``[service] receipts_retention_hours``).

Settling reads a receipt within the settle window (``settle_window_ms``, 30 s) of its create, or, after a restart
(a kill -9 mid-call), when the journal resumes the run; a status Meta could not deliver is retried "for up to 7
days" (https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks) and is then recorded afresh. 8 days covers
an outage as long as Meta's whole retry period, with a day to resume, and bounds the table to about 8 days of
WhatsApp sends."""


class ReceiptStatus(enum.StrEnum):
    """A message status as the platform reports it (WhatsApp's ``statuses[].status``)."""

    FAILED = "failed"
    """The platform did not send the message (its ``errors[0].code`` says why)."""
    SENT = "sent"
    """Stored and sent by the platform (not yet on the person's phone)."""
    DELIVERED = "delivered"
    READ = "read"


STATUS_RANK = {ReceiptStatus.FAILED: 0, ReceiptStatus.SENT: 1, ReceiptStatus.DELIVERED: 2, ReceiptStatus.READ: 3}
"""A receipt keeps the status of highest rank it was told: any of ``sent``/``delivered``/``read`` proves the message
was stored, and a later ``failed`` (not delivered to the phone) does not undo that."""


@dataclass(frozen=True)
class Receipt:
    """One message's status, keyed by the delivery id its create carried.

    Attributes:
        delivery_id: the id the create carried (WhatsApp: ``biz_opaque_callback_data``).
        status: the strongest status heard (:data:`STATUS_RANK`).
        message_id: the platform's id of the message (WhatsApp: ``wamid.…``).
        error_code: a ``failed`` status's error code (None otherwise, or when the platform gave none).
        recorded_at_s: when the sidecar recorded it (Unix seconds, wall clock: it outlives a restart).
    """

    delivery_id: str
    status: ReceiptStatus
    message_id: str
    error_code: int | None = None
    recorded_at_s: float = 0.0

    @property
    def landed(self) -> bool:
        """The platform stored the message (``sent``, ``delivered`` or ``read``)."""
        return self.status is not ReceiptStatus.FAILED

    def merged(self, newer: Receipt) -> Receipt:
        """This receipt told ``newer`` too: the stronger status wins (:data:`STATUS_RANK`); the time is the newer."""
        if STATUS_RANK[newer.status] > STATUS_RANK[self.status]:
            return newer
        return dataclasses.replace(self, recorded_at_s=max(self.recorded_at_s, newer.recorded_at_s))


class Receipts(Protocol):
    """Where status receipts are kept durably, per platform and delivery id."""

    async def record(self, platform: str, receipts: Sequence[Receipt]) -> None:
        """Keep ``receipts`` (each merged into the one already kept for its delivery id: :meth:`Receipt.merged`);
        durable when it returns.

        Raises:
            Exception: the store failed (the webhook answers 500, and the platform delivers it again).
        """
        ...

    async def find(self, platform: str, delivery_id: str) -> Receipt | None:
        """The receipt of ``delivery_id`` on ``platform``, or None when none was heard."""
        ...

    async def last_heard_s(self, platform: str) -> float | None:
        """When the newest receipt of ``platform`` was recorded (Unix seconds), None when none ever was: proof that
        the platform's status webhooks reach the sidecar."""
        ...

    async def prune(self, recorded_before_s: float) -> int:
        """Delete the receipts last recorded before ``recorded_before_s`` (Unix seconds), of every platform; return
        how many (a store that expires them by itself, Redis, returns 0: they are already gone).

        Raises:
            Exception: the store failed (tried again at the next turn).
        """
        ...


class MemoryReceipts:
    """:class:`Receipts` in a dict: tests, and a sidecar without a durable store (nothing survives a restart)."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str], Receipt] = {}
        self._heard: dict[str, float] = {}

    async def record(self, platform: str, receipts: Sequence[Receipt]) -> None:
        for receipt in receipts:
            key = (platform, receipt.delivery_id)
            old = self._kept.get(key)
            self._kept[key] = receipt if old is None else old.merged(receipt)
            self._heard[platform] = max(self._heard.get(platform, 0.0), receipt.recorded_at_s)

    async def find(self, platform: str, delivery_id: str) -> Receipt | None:
        return self._kept.get((platform, delivery_id))

    async def last_heard_s(self, platform: str) -> float | None:
        return self._heard.get(platform)

    async def prune(self, recorded_before_s: float) -> int:
        old = [key for key, receipt in self._kept.items() if receipt.recorded_at_s < recorded_before_s]
        for key in old:
            del self._kept[key]
        return len(old)
