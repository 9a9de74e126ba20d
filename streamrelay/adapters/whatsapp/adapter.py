"""WhatsAppAdapter: one business phone number's :class:`core.ports.ChannelAdapter` on pywa (WhatsApp Cloud API).

The adapter is composed: it holds its connection (:class:`adapters.whatsapp.connection.WhatsAppConnection`: one
attempt per call, errors translated) and its renderings (:func:`adapters.whatsapp.render.render` in a
:class:`~adapters.rendering.RenderCache`: a text measured then sent is rendered once).

Every call is ``POST /{version}/{phone-number-id}/messages``
(https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages):

- a text is ``type: text`` with ``text.body`` (at most 4,096 characters,
  https://developers.facebook.com/docs/whatsapp/cloud-api/messages/text-messages), a reply when the target has
  ``reply_to`` (``context.message_id``);
- a media item is sent by link: ``type`` ``image``, ``document`` (a file, or audio with a caption: audio messages
  take no caption), ``audio`` or ``video`` with ``{"link": url}`` and the ``caption``
  (https://developers.facebook.com/docs/whatsapp/cloud-api/messages/image-messages);
- typing is the person's message marked as read with ``typing_indicator: {"type": "text"}``, shown until the reply
  or 25 s (https://developers.facebook.com/documentation/business-messaging/whatsapp/typing-indicators/). It names
  the *incoming* message's id (``wamid.…``): the sidecar has one only when the run's target carries it in
  ``reply_to``; without it no typing call is made (there is no typing by phone number).

What the Cloud API cannot do, and what the adapter does instead:

- Edit or delete a sent message: there is no such call. The settings turn ``preview`` and ``progress`` into block
  replies (:meth:`config.settings.ChannelSettings.effective_delivery`); :meth:`edit_text` and
  :meth:`delete_message` refuse with ``PermanentDeliveryError``.
- Idempotency: a send carries no key the platform dedupes on, and no call lists the messages a number sent. Every
  send carries its delivery id as ``biz_opaque_callback_data`` (pywa's ``tracker``), which the Cloud API echoes in the
  message's status webhooks; with the sidecar's receipts wired (:meth:`use_receipts`: the webhook route records them,
  :mod:`adapters.whatsapp.webhook`), an uncertain send (a timeout, a reset after sending, a 5xx, a kill -9) is settled
  by its status (:mod:`adapters.whatsapp.settle`). Without them it is ``unknown``: reported, never sent again blind.
- A closed customer service window (131047): with ``use_window_template`` the channel's approved template goes
  instead, once per closed window, and the refusal says so (:mod:`adapters.whatsapp.window`).
- Buttons on a sent message: none; an approval's Approve and Deny are a reply-buttons message replying to it, sent
  once (:meth:`set_stop`, :mod:`adapters.whatsapp.buttons`); taps reach the sidecar's webhook
  (:mod:`adapters.whatsapp.webhook`).
- Threads: none. ``subagents = "thread"`` falls back to status lines (:meth:`thread_refusal` is not offered: the
  adapter has no :class:`core.ports.Threads`); replies with context would quote the person's message on every
  sub-agent line and read as answers to it, so status lines are the honest rendering.
"""

from __future__ import annotations

import asyncio
import re
import time
from types import SimpleNamespace
from typing import Any

from pywa.types.callback import Button
from pywa.types.templates import TemplateLanguage
from pywa_async.client import WhatsApp

from streamrelay.adapters.adapter_parts import ConnectionTimeout, close_connection, measure_rendered, shows
from streamrelay.adapters.rendering import RenderCache
from streamrelay.adapters.whatsapp.buttons import BODY, check_buttons, tracker
from streamrelay.adapters.whatsapp.connection import WhatsAppConnection
from streamrelay.adapters.whatsapp.errors import PLATFORM, WindowClosedError
from streamrelay.adapters.whatsapp.render import Rendered, render
from streamrelay.adapters.whatsapp.settle import decide
from streamrelay.adapters.whatsapp.window import SentTemplates, WindowTemplate
from streamrelay.core.delivery.calls import CallObserver, perform_call
from streamrelay.core.errors import DeliveryError, PermanentDeliveryError, UncertainDeliveryError, UnreadableAnswerError
from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem, MediaKind
from streamrelay.core.ports import (
    NO_MARKUP,
    MarkupPermissions,
    PendingSend,
    Settlement,
    SettleOutcome,
    StopControl,
    TextFormat,
)
from streamrelay.core.records.receipts import Receipts, ReceiptStatus
from streamrelay.core.units import LengthUnit

WA_ID_RE = re.compile(r"^\d{6,20}$")
"""A WhatsApp user id (``wa_id``): the phone number's digits with the country code, no ``+``."""
MESSAGE_ID_RE = re.compile(r"^wamid\.[A-Za-z0-9+/=_-]+$")
"""A WhatsApp message id: ``wamid.`` and base64."""
SETTLE_POLL_S = 0.2
"""How often a settle looks at the receipts again while it waits for a status (seconds)."""
NO_EDITS = (
    "the WhatsApp Cloud API cannot edit or delete a sent message "
    "(https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages): use delivery block or final"
)


class WhatsAppAdapter:
    """Sends one business phone number's messages to WhatsApp users through pywa (or a mock Graph API).

    Args:
        token: ``PHONE_NUMBER_ID:ACCESS_TOKEN`` (the business phone number id the messages are sent from, then the
            access token).
        base_url: the Graph API's URL (None: https://graph.facebook.com).
        send_timeout_s: seconds one call may take.
        max_units: the most UTF-16 units of one text body (4,096 characters at most).
        markup: kept for the factory's signature: WhatsApp text has no mentions or platform links to allow.

    Raises:
        ConfigError: a malformed token.
    """

    platform: str = PLATFORM
    unit: LengthUnit = LengthUnit.UTF16
    observer: CallObserver | None = None

    perform = perform_call
    """The core's one entrance (:meth:`core.ports.ChannelAdapter.perform`): ``call`` in one attempt, its outcome as a
    value (done, not done, unknown); never raises a delivery error."""

    def __init__(
        self,
        token: str,
        *,
        base_url: str | None = None,
        send_timeout_s: float = 10.0,
        max_units: int = 4_096,
        markup: MarkupPermissions = NO_MARKUP,
    ) -> None:
        self.markup = markup
        self.max_units = max_units
        self._conn = WhatsAppConnection(token, base_url=base_url, send_timeout_s=send_timeout_s)
        self.render: RenderCache[Rendered] = RenderCache(render)
        """``render(text, fmt) -> Rendered``: the body and its length."""
        self.receipts: Receipts | None = None
        """The status receipts the webhook records (None: uncertain sends stay ``unknown``)."""
        self.settle_window_s = 30.0
        """How long a settle waits for the status of an uncertain send (seconds, :mod:`adapters.whatsapp.settle`)."""
        self._clock = time.time
        self.window_template: WindowTemplate | None = None
        """The template sent when the customer service window is closed (None: 131047 is only reported)."""
        self._templates = SentTemplates()
        self._buttons: dict[str, str] = {}
        """Buttons messages by :func:`adapters.whatsapp.buttons.tracker`: their ``wamid``, or ``""`` while unknown."""

    def use_window_template(
        self, name: str, language: str, parameter: str = "first_line", text: str | None = None
    ) -> None:
        """Send template ``name`` (``language``) when a send meets a closed customer service window (131047), filled
        per ``parameter`` (``first_line``, ``fixed`` with ``text``, ``none``): :mod:`adapters.whatsapp.window`.

        Raises:
            ValueError: an unknown ``parameter``, or ``fixed`` without ``text``.
        """
        if parameter not in ("first_line", "fixed", "none") or (parameter == "fixed") != (text is not None):
            raise ValueError("parameter must be first_line, fixed (with text) or none")
        self.window_template = WindowTemplate(name, language, parameter, text)  # type: ignore[arg-type]

    def use_receipts(self, receipts: Receipts, settle_window_s: float) -> None:
        """Settle uncertain sends by their status webhooks, recorded in ``receipts``, waiting up to
        ``settle_window_s`` seconds for one (:mod:`adapters.whatsapp.settle`)."""
        self.receipts, self.settle_window_s = receipts, settle_window_s

    __repr__ = __str__ = shows(base_url="_conn.base_url")
    send_timeout_s = ConnectionTimeout()
    close = close_connection
    measure = measure_rendered

    def check_target(self, target: Target) -> str | None:
        """``chat_id`` is a WhatsApp user id (digits); ``reply_to`` a message id (``wamid.…``); no ``thread_id``."""
        if not WA_ID_RE.match(str(target.chat_id)):
            return f"chat_id {target.chat_id!r} must be a WhatsApp user id (the phone number's digits, no +)"
        if target.thread_id is not None:
            return f"thread_id {target.thread_id!r}: WhatsApp has no threads"
        if target.reply_to is not None and not MESSAGE_ID_RE.match(str(target.reply_to)):
            return f"reply_to {target.reply_to!r} must be a WhatsApp message id (wamid....)"
        return None

    def is_group(self, target: Target) -> bool:
        """False: Cloud API messages here go to one person (the pair rate limit is per person)."""
        return False

    # -------------------------------------------------------------- messages

    async def _send(self, target: Target, action: Any, answer_text: str = "") -> str:
        """One create; on a closed customer service window the channel's template is sent instead (once per closed
        window) and the refusal says so (:mod:`adapters.whatsapp.window`)."""
        chat = str(target.chat_id)
        closed: WindowClosedError | None = None
        try:
            answer = await self._conn.call("messages", target, action, creates=True)
        except WindowClosedError as refused:
            if self.window_template is None:
                raise
            closed = refused
        if closed is not None:
            note = await self._reengage(target, answer_text)
            raise WindowClosedError(f"{closed}; {note}", platform=PLATFORM, target=chat)
        message_id = getattr(answer, "id", None)
        if not message_id:
            raise UnreadableAnswerError(
                "whatsapp messages: no message id in the answer", platform=PLATFORM, target=chat
            )
        self._templates.reopened(chat)
        return str(message_id)

    async def _reengage(self, target: Target, answer_text: str) -> str:
        """Send the window template to ``target`` unless this closed window had it already; what came of it."""
        template, chat = self.window_template, str(target.chat_id)
        if template is None:
            return "no window template is configured"
        known = self._templates.note(chat)
        if known is not None:
            return f"{known} (once per closed window: not sent again)"
        components = template.params(answer_text)
        language = _language(template.language)

        async def send(client: WhatsApp) -> Any:
            return await client.send_template(chat, template.name, language, params=components)

        label = f"window template {template.name!r} ({template.language})"
        try:
            sent = await self._conn.call("messages", target, send, creates=True)
        except UncertainDeliveryError as unknown:
            note = f"the {label} may have been sent (no answer: {unknown}); it is not sent again"
        except PermanentDeliveryError as failed:
            note = f"the {label} could not be sent: {failed}"
        except DeliveryError as failed:  # transient (429, 5xx): the next refused part tries again
            return f"the {label} could not be sent now: {failed}"
        else:
            note = (
                f"the {label} was sent instead as {getattr(sent, 'id', '?')}: the person is told an answer waits and "
                "to reply; this part is delivered when they write again (resend it from the desk)"
            )
        self._templates.done(chat, note)
        return note

    async def send_text(self, target: Target, text: str, fmt: TextFormat, *, delivery_id: str | None = None) -> str:
        """Send a text message (module docstring); return its id (``wamid.…``). ``delivery_id`` goes as
        ``biz_opaque_callback_data`` (at most 512 characters; the Cloud API does not dedupe on it, it echoes it in the
        message's status webhooks: https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages).

        Raises:
            core.errors.UncertainDeliveryError: a timeout, a connection lost after sending, or a 5xx: the message may
                exist (:meth:`settle_send` reads its status webhook).
            core.errors.DeliveryError: another subclass, per :mod:`adapters.whatsapp.errors` (131047: the 24-hour
                window is closed, ``ForbiddenError``; 131056: the pair rate limit, ``RateLimitedError``).
        """
        body = self.render(text, fmt).body
        to, reply = str(target.chat_id), _reply(target)

        async def send(client: WhatsApp) -> Any:
            return await client.send_message(to, body, reply_to_message_id=reply, tracker=delivery_id)

        return await self._send(target, send, text)

    async def send_media(
        self, target: Target, media: MediaItem, fmt: TextFormat, *, delivery_id: str | None = None
    ) -> str:
        """Send ``media`` by link (module docstring); return its message id. A caption is rendered like a text;
        ``delivery_id`` goes as ``biz_opaque_callback_data`` (:meth:`send_text`).

        Raises:
            core.errors.DeliveryError: a subclass, like :meth:`send_text` (131052/131053: the link could not be
                fetched, ``PayloadRejectedError``).
        """
        caption = self.render(media.caption, fmt).body if media.caption else None
        to, reply, url, tracker = str(target.chat_id), _reply(target), media.url, delivery_id

        async def send(client: WhatsApp) -> Any:
            if media.kind is MediaKind.IMAGE:
                return await client.send_image(to, url, caption=caption, reply_to_message_id=reply, tracker=tracker)
            if media.kind is MediaKind.VIDEO:
                return await client.send_video(to, url, caption=caption, reply_to_message_id=reply, tracker=tracker)
            if media.kind is MediaKind.AUDIO and caption is None:
                return await client.send_audio(to, url, reply_to_message_id=reply, tracker=tracker)
            filename = url.rsplit("/", 1)[-1].split("?", 1)[0] or "file"
            return await client.send_document(
                to, url, filename=filename, caption=caption, reply_to_message_id=reply, tracker=tracker
            )

        return await self._send(target, send, media.caption or f"{media.kind.capitalize()}: {media.url}")

    async def settle_send(self, target: Target, pending: PendingSend) -> Settlement:
        """Settle an uncertain send by its status webhook, without a platform call: the receipts are read every
        :data:`SETTLE_POLL_S` until :func:`adapters.whatsapp.settle.decide` answers (at most
        :attr:`settle_window_s`): ``found`` with the ``wamid`` (landed), ``not_sent`` (a ``failed`` status, or
        silence while other statuses arrive) or ``unknown`` (silence, and no webhook heard). Without receipts
        (:meth:`use_receipts` not called: no app secret configured): ``unknown`` at once; the core reports it
        uncertain and never sends it again blind."""
        receipts = self.receipts
        if receipts is None:
            return Settlement(SettleOutcome.UNKNOWN)
        started = self._clock()
        while True:
            receipt = await receipts.find(PLATFORM, pending.delivery_id)
            now = self._clock()
            waited = now - started >= self.settle_window_s  # silence is read only once the window is over
            heard = await receipts.last_heard_s(PLATFORM) if receipt is None and waited else None
            settlement = decide(
                receipt, started_at_s=started, now_s=now, window_s=self.settle_window_s, last_heard_s=heard
            )
            if settlement is not None:
                return settlement
            await asyncio.sleep(SETTLE_POLL_S)

    async def edit_text(self, target: Target, message_id: str, text: str, fmt: TextFormat) -> bool:
        """Refused: WhatsApp cannot edit a sent message (the settings make such channels block replies).

        Raises:
            core.errors.PermanentDeliveryError: always.
        """
        raise PermanentDeliveryError(f"whatsapp: {NO_EDITS}", platform=PLATFORM, target=str(target.chat_id))

    async def delete_message(self, target: Target, message_id: str) -> None:
        """Refused: WhatsApp cannot delete a sent message.

        Raises:
            core.errors.PermanentDeliveryError: always.
        """
        raise PermanentDeliveryError(f"whatsapp: {NO_EDITS}", platform=PLATFORM, target=str(target.chat_id))

    async def set_stop(
        self, target: Target, message_id: str, text: str, fmt: TextFormat, control: StopControl | None
    ) -> None:
        """Put ``control``'s buttons under message ``message_id``: a reply-buttons message replying to it
        (:mod:`adapters.whatsapp.buttons`), sent once (its status webhook, or this adapter's memory, says whether it
        went). Taking buttons off is refused: WhatsApp cannot.

        Raises:
            core.errors.PermanentDeliveryError: ``control`` None (buttons cannot be taken off a sent message), or a
                buttons message whose outcome stays unknown (never sent twice).
            core.errors.DeliveryError: another subclass, like a send (131047 outside the window).
        """
        chat = str(target.chat_id)
        if control is None:
            raise PermanentDeliveryError(
                "whatsapp: reply buttons cannot be taken off a sent message (no edits): they stay, and a tap after "
                "the decision is answered with it",
                platform=PLATFORM,
                target=chat,
            )
        buttons = control.buttons()
        check_buttons(buttons)
        key = tracker(message_id, control.control_id)
        if self._buttons.get(key):
            return
        if key in self._buttons:  # tried here, outcome unknown: its status decides (never sent twice)
            settled = await self.settle_send(target, PendingSend(key, BODY, TextFormat.PLAIN))
            if settled.outcome is SettleOutcome.UNKNOWN:
                raise PermanentDeliveryError(
                    "whatsapp: the approval's buttons message may have been sent (no answer, no status webhook): "
                    "not sent again",
                    platform=PLATFORM,
                    target=chat,
                )
            if settled.outcome is SettleOutcome.FOUND:
                self._buttons[key] = settled.message_id or "?"
                return
        elif self.receipts is not None:  # a first try here: after a restart, its status may say it went
            receipt = await self.receipts.find(PLATFORM, key)
            if receipt is not None and receipt.status is not ReceiptStatus.FAILED:
                self._buttons[key] = receipt.message_id
                return
        reply = [Button(title=title, callback_data=control_id) for control_id, title in buttons]

        async def send(client: WhatsApp) -> Any:
            return await client.send_message(chat, BODY, buttons=reply, reply_to_message_id=message_id, tracker=key)

        self._buttons[key] = ""
        try:
            sent = await self._conn.call("messages", target, send, creates=True)
        except UncertainDeliveryError:
            raise
        except DeliveryError:
            del self._buttons[key]  # not sent: may go again
            raise
        self._buttons[key] = str(getattr(sent, "id", "") or "?")

    async def send_typing(self, target: Target) -> None:
        """Mark the person's message ``target.reply_to`` as read with a typing indicator (module docstring); no call
        when the target names no incoming message (typing needs one)."""
        if target.reply_to is None:
            return
        message_id = str(target.reply_to)

        async def typing(client: WhatsApp) -> Any:
            return await client.indicate_typing(message_id)

        await self._conn.call("messages", target, typing, creates=False)

    async def clear_typing(self, target: Target) -> None:
        """Nothing: the indicator ends at the reply or after 25 s by itself (no call takes it down)."""


def _language(code: str) -> Any:
    """pywa's ``TemplateLanguage`` for ``code``, or an object with the same ``value`` for a code pywa does not list
    (pywa sends ``language.value`` as the code)."""
    try:
        return TemplateLanguage(code)
    except ValueError:
        return SimpleNamespace(value=code)


def _reply(target: Target) -> str | None:
    return str(target.reply_to) if target.reply_to is not None else None
