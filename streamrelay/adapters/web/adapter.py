"""The web channel's adapter: a "message" is a part of the run's live page, shown through the run's SSE stream.

The page is the platform: sending or editing a part is keeping its text (the core's reconciler then tells the
run monitor, whose ``delivery`` events carry the part's text to the browser). Nothing leaves the process, so no
call fails, is rate limited or times out; "not modified" (the same text again) is answered like a platform would.
A part holds at most ``max_units`` UTF-16 units (a page has no platform limit: this keeps one SSE event small).
The page's texts reach the browser from the run's monitor (while the run goes on) and from what a finished run keeps
(:mod:`core.run.finished`, the ledger's parts), never from here: in service the adapter keeps of each part only a
digest of its text (what "not modified" and an edit's target need: 16 bytes, not a copy of every answer it showed);
with ``record`` (tests, the case runner, the demo) it keeps the texts too, for :meth:`WebAdapter.visible`.
A send with a delivery id remembers it, so :meth:`WebAdapter.settle_send` can say whether that part exists (after a
restart the page is empty: ``not_sent``, sent anew). A media item is a part of its own (:meth:`WebAdapter.send_media`):
the page shows it as a link with its caption (its CSP, ``img-src 'self' data:``, shows no outside image).
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from dataclasses import dataclass

from streamrelay.adapters.invisible import strip_invisible
from streamrelay.core.delivery.calls import CallObserver, perform_call
from streamrelay.core.errors import PayloadRejectedError, RejectReason, TargetNotFoundError
from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem
from streamrelay.core.ports import PendingSend, Settlement, SettleOutcome, TextFormat
from streamrelay.core.units import LengthUnit, text_units

PLATFORM = "web"
MAX_UNITS = 65_536
"""The most UTF-16 units one part of the page holds."""
KEEP_MESSAGES = 100_000
"""Parts whose text is kept (the oldest are forgotten: an edit of a forgotten part sends it anew)."""


@dataclass(frozen=True, slots=True)
class Rendered:
    """What the page shows for a text: the text itself (the page renders Markdown in the browser), and ``units``,
    its length in UTF-16 units."""

    text: str
    units: int


@dataclass
class WebCall:
    """One call the web channel received (for the case runner and tests): like a mock platform's record."""

    method: str
    chat_id: int | str
    message_id: str | None
    text: str | None
    t: float
    status: int = 200
    ok: bool = True


class WebAdapter:
    """Parts of live run pages, kept in memory.

    Args:
        max_units: the most UTF-16 units one part holds (at most :data:`MAX_UNITS`).
        record: keep every call in :attr:`calls` and every part's text (:meth:`visible`) (tests, the case runner, the
            demo); off in service, where a part is kept as a digest of its text.
    """

    platform = PLATFORM
    unit = LengthUnit.UTF16

    observer: CallObserver | None = None
    """Watches every call :meth:`perform` makes (metrics; :class:`core.ports.ChannelAdapter`)."""

    perform = perform_call
    """The core's one entrance (:meth:`core.ports.ChannelAdapter.perform`): ``call`` in one attempt, its outcome as a
    value (done, not done, unknown); never raises a delivery error."""

    def __init__(self, *, max_units: int = MAX_UNITS, record: bool = False) -> None:
        self.max_units = min(max_units, MAX_UNITS)
        self._texts: OrderedDict[str, str | bytes] = OrderedDict()
        """``chat id:message id`` → the part's text (with ``record``) or its digest (:func:`_digest`)."""
        self._deliveries: OrderedDict[str, str] = OrderedDict()
        """``delivery id → chat id:message id`` (the same ``str`` as the part's key in ``_texts``) of the sends that
        named one, as many as parts are kept."""
        self._next = 0
        self.record = record
        self.calls: list[WebCall] = []

    def __repr__(self) -> str:
        return f"WebAdapter(max_units={self.max_units})"

    def render(self, text: str, fmt: TextFormat) -> Rendered:
        """The part as the page shows it: the text as written without invisible characters
        (:func:`adapters.invisible.strip_invisible`; the page's script removes them by the same rule from what the
        run's events carry), whatever ``fmt``; never HTML: the page renders Markdown with raw HTML off."""
        shown = strip_invisible(text)
        return Rendered(shown, text_units(shown, self.unit))

    def measure(self, text: str, fmt: TextFormat) -> int:
        """UTF-16 units of the text (at most those of :meth:`render`: the text as written, a safe bound)."""
        return text_units(text, self.unit)

    def check_target(self, target: Target) -> str | None:
        return None  # a page is named by anything: the run's target only labels it

    def is_group(self, target: Target) -> bool:
        return False

    def visible(self, chat_id: int | str) -> list[tuple[str, str]]:
        """``(message id, text)`` of the parts shown for ``chat_id``, oldest first (by message id: an edit keeps a
        part's place). The texts of parts kept while ``record`` was on (a part kept without it shows its digest's
        hex: the service keeps no text here)."""
        prefix = f"{chat_id}:"
        shown = [(key[len(prefix) :], _text(kept)) for key, kept in self._texts.items() if key.startswith(prefix)]
        return sorted(shown, key=lambda part: int(part[0]))

    async def send_text(self, target: Target, text: str, fmt: TextFormat, *, delivery_id: str | None = None) -> str:
        self._check(target, text)
        self._next += 1
        message_id = str(self._next)
        key = self._keep(target, message_id, text)
        if delivery_id is not None:
            self._remember(delivery_id, key)
        self._record("sendMessage", target, message_id, text)
        return message_id

    async def send_media(
        self, target: Target, media: MediaItem, fmt: TextFormat, *, delivery_id: str | None = None
    ) -> str:
        """A media part: the page keeps its caption as the part's text (``""`` without one: what a person reads of
        it beside the link, :func:`mocks.calls.chat_record`); the live page gets the item from the run's ``media``
        and ``delivery`` events."""
        self._next += 1
        message_id = str(self._next)
        key = self._keep(target, message_id, media.caption or "")
        if delivery_id is not None:
            self._remember(delivery_id, key)
        self._record("sendMedia", target, message_id, media.caption or "")
        return message_id

    def _remember(self, delivery_id: str, key: str) -> None:
        self._deliveries[delivery_id] = key  # the part's own key: one str, no tuple of two more
        self._deliveries.move_to_end(delivery_id)
        while len(self._deliveries) > KEEP_MESSAGES:
            self._deliveries.popitem(last=False)

    async def settle_send(self, target: Target, pending: PendingSend) -> Settlement:
        """``found`` when the part sent with ``pending.delivery_id`` is on the page, else ``not_sent`` (no call)."""
        chat_id, _, message_id = self._deliveries.get(pending.delivery_id, "").rpartition(":")
        if chat_id != str(target.chat_id) or f"{chat_id}:{message_id}" not in self._texts:
            return Settlement(SettleOutcome.NOT_SENT)
        return Settlement(SettleOutcome.FOUND, message_id)

    async def edit_text(self, target: Target, message_id: str, text: str, fmt: TextFormat) -> bool:
        self._check(target, text)
        key = f"{target.chat_id}:{message_id}"
        if key not in self._texts:
            self._record("editMessage", target, message_id, text, status=404)
            raise TargetNotFoundError(f"web: part {message_id} is not on the page", platform=PLATFORM)
        self._record("editMessage", target, message_id, text)
        kept = self._texts[key]
        if kept == (text if isinstance(kept, str) else _digest(text)):
            return False
        self._keep(target, message_id, text)
        return True

    async def delete_message(self, target: Target, message_id: str) -> None:
        self._record("deleteMessage", target, message_id, None)
        self._texts.pop(f"{target.chat_id}:{message_id}", None)

    async def send_typing(self, target: Target) -> None:
        return None  # the page shows the run's state itself

    async def clear_typing(self, target: Target) -> None:
        return None

    async def close(self) -> None:
        return None

    def _check(self, target: Target, text: str) -> None:
        if not text.strip():
            raise PayloadRejectedError("web: a part needs text", reason=RejectReason.EMPTY, platform=PLATFORM)
        if text_units(text, self.unit) > self.max_units:
            too_long = f"web: a part holds at most {self.max_units} UTF-16 units"
            raise PayloadRejectedError(too_long, reason=RejectReason.TOO_LONG, platform=PLATFORM)

    def _keep(self, target: Target, message_id: str, text: str) -> str:
        """Keep the part's text (or digest); returns its key, ``chat id:message id``."""
        key = f"{target.chat_id}:{message_id}"
        self._texts[key] = text if self.record else _digest(text)
        self._texts.move_to_end(key)
        while len(self._texts) > KEEP_MESSAGES:
            self._texts.popitem(last=False)
        return key

    def _record(self, method: str, target: Target, message_id: str | None, text: str | None, status: int = 200) -> None:
        if self.record:
            call = WebCall(method, target.chat_id, message_id, text, time.monotonic(), status, status == 200)
            self.calls.append(call)


def _digest(text: str) -> bytes:
    """What the service keeps of a part's text: 16 bytes that differ for different texts (BLAKE2b)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _text(kept: str | bytes) -> str:
    return kept if isinstance(kept, str) else kept.hex()
