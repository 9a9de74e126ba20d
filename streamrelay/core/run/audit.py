"""The audit: what the platform shows now of a run's delivered messages, against what the ledger says was delivered.

A run's report is final when the run ends, but a person or a moderator may delete or edit a message afterwards ("the
transcript says sent, the chat does not show it"). :func:`audit_run` reads back each message the ledger has as
acknowledged (``acked``, with a message id, not an open native stream) through the channel adapter's optional
:class:`core.ports.ReadBack` and reports per message:

- ``as_delivered``: it shows the acknowledged text; ``changed``: it shows another text (edited by someone else, or
  moderated); ``gone``: the platform has it no more (deleted);
- ``unreadable``: the read failed (no permission, a 429, an outage): ``detail`` says why, nothing is concluded;
- ``not_checked``: a media part (its file is not compared) or a part with no text.

A platform whose API cannot read a message back (WhatsApp: the Cloud API has no such call; Teams without Microsoft Graph
configured; Telegram: the Bot API has no such method, and forwardMessage or
copyMessage would post one) is reported ``readable: false`` with the reason and no per-message verdicts: never
"as delivered" by default. The reads are one call per message, in order, made directly through the adapter (not
through the conversation's send chain: an audit is an operator's occasional request, not a run's delivery).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.errors import DeliveryError
from streamrelay.core.events import Target
from streamrelay.core.ports import ReadBack, Shown
from streamrelay.core.records.ledger import Ledger, PartRecord
from streamrelay.core.records.report import PartState, SlotRole

NOT_READABLE: Mapping[str, str] = {
    "telegram": "the Telegram Bot API has no method that reads a message by its id (https://core.telegram.org/bots/api)"
    "; forwardMessage and copyMessage would post a message, so nothing is read back",
    "whatsapp": "the WhatsApp Cloud API has no call that reads a sent message back: it sends messages and reports "
    "their statuses by webhook (https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages)",
}
"""Why a platform's messages cannot be read back, by platform (others without :class:`ReadBack`: a generic reason)."""


class Verdict(enum.StrEnum):
    """One message's audit verdict (module docstring)."""

    AS_DELIVERED = "as_delivered"
    CHANGED = "changed"
    GONE = "gone"
    UNREADABLE = "unreadable"
    NOT_CHECKED = "not_checked"


DRIFT = frozenset({Verdict.CHANGED, Verdict.GONE})
"""The verdicts that say the chat no longer shows what was delivered."""


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One delivered message's verdict: its part's ``slot`` and ``role``, its ``message_id``, why (``detail``)."""

    slot: int
    role: str
    message_id: str
    verdict: Verdict
    detail: str = ""


@dataclass(slots=True)
class AuditReport:
    """A run's audit (module docstring). ``readable``: the platform lets messages be read back; ``note`` says why
    not when it does not."""

    run: str
    channel: str
    platform: str
    readable: bool
    note: str = ""
    messages: list[AuditRow] = field(default_factory=list)

    @property
    def drift(self) -> list[AuditRow]:
        """The messages the chat no longer shows as delivered (``changed`` or ``gone``)."""
        return [row for row in self.messages if row.verdict in DRIFT]

    def public(self, run: str | None = None) -> dict[str, Any]:
        """As JSON: ``run`` (the client's id when given), ``channel``, ``platform``, ``readable``, ``note``,
        ``messages`` (each ``slot``, ``role``, ``message_id``, ``verdict``, ``detail``), ``drift`` (how many)."""
        return {
            "run": run if run is not None else self.run,
            "channel": self.channel,
            "platform": self.platform,
            "readable": self.readable,
            "note": self.note,
            "messages": [
                {
                    "slot": r.slot,
                    "role": r.role,
                    "message_id": r.message_id,
                    "verdict": str(r.verdict),
                    "detail": r.detail,
                }
                for r in self.messages
            ],
            "drift": len(self.drift),
        }


class AuditError(LookupError):
    """The run cannot be audited here: unknown to the ledger, or its channel is not configured."""


def delivered(part: PartRecord) -> bool:
    """Whether ``part`` is a message the platform acknowledged and that still exists as a message id."""
    return part.state is PartState.ACKED and part.message_id is not None and not part.streaming and part.slot >= 0


async def audit_run(run: str, ledger: Ledger, channels: Mapping[str, ChannelRuntime]) -> AuditReport:
    """Audit ``run`` (the core's run key) against its channel's platform (module docstring).

    Raises:
        AuditError: the ledger knows no such run, or its channel is not configured here.
    """
    record = await ledger.get_run(run)
    if record is None:
        raise AuditError(f"run {run!r} is not in the ledger")
    runtime = channels.get(record.channel)
    if runtime is None:
        raise AuditError(f"run {run!r} went to channel {record.channel!r}, which is not configured here")
    adapter = runtime.adapter
    platform = adapter.platform
    why_not = adapter.unreadable() if isinstance(adapter, ReadBack) else None
    report = AuditReport(run, record.channel, platform, readable=isinstance(adapter, ReadBack) and why_not is None)
    if not isinstance(adapter, ReadBack) or why_not is not None:
        report.note = why_not or NOT_READABLE.get(platform, f"the {platform} adapter cannot read a message back")
        return report
    target = Target.model_validate(record.target)
    fmt = runtime.policy.fmt
    for part in await ledger.parts(run):
        if not delivered(part):
            continue
        message_id = part.message_id or ""
        row = AuditRow(part.slot, str(part.role), message_id, Verdict.NOT_CHECKED)
        if part.role is SlotRole.MEDIA or not part.shown:
            report.messages.append(row)
            continue
        try:
            shown = await adapter.read_back(target, message_id, part.shown, fmt)
        except DeliveryError as exc:
            report.messages.append(AuditRow(part.slot, str(part.role), message_id, Verdict.UNREADABLE, str(exc)))
            continue
        verdict = {Shown.AS_DELIVERED: Verdict.AS_DELIVERED, Shown.CHANGED: Verdict.CHANGED, Shown.GONE: Verdict.GONE}
        report.messages.append(AuditRow(part.slot, str(part.role), message_id, verdict[shown]))
    return report
