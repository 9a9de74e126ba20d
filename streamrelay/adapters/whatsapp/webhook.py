"""The sidecar's WhatsApp webhook: ``GET`` and ``POST /v1/platforms/whatsapp/webhook`` (:class:`WhatsAppWebhook`).

The Cloud API posts a ``statuses`` webhook for every message a business number sent: ``sent``, ``delivered``,
``read`` or ``failed``, each with the message's ``id`` (``wamid.…``) and the ``biz_opaque_callback_data`` its create
carried (https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/components). The sidecar's creates carry
their delivery id there, so each status is a receipt of one delivery (:mod:`core.records.receipts`), which settles a
create whose answer was lost (:mod:`adapters.whatsapp.settle`).

- ``GET ?hub.mode=subscribe&hub.verify_token=T&hub.challenge=C``: Meta's verification request when the webhook URL
  is configured: ``C`` back (200, text) when ``T`` is the configured verify token, else 403
  (https://developers.facebook.com/docs/graph-api/webhooks/getting-started#verification-requests).
- ``POST``: the body is checked against ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body with the app
  secret>`` (https://developers.facebook.com/docs/graph-api/webhooks/getting-started#validate-payloads) in constant
  time; a missing or wrong signature is 401 and nothing is recorded. Then every ``entry[].changes[].value.statuses[]``
  with a ``biz_opaque_callback_data`` is recorded (one commit); statuses without it (other senders of the number)
  are ignored. Then every incoming ``messages[]`` entry that is a tap of an approval's reply button (``type:
  interactive``, ``interactive.button_reply.id`` ``approve:<run16>:<id16>`` or ``deny:…``,
  :mod:`adapters.whatsapp.buttons`) is decided as the bot route decides a press (``POST
  /v1/runs/{run16}/approvals/{id16}``: the approver checked, decided once, journaled), by ``whatsapp:user:<from>``;
  other messages are ignored. The answer is 200 ``{"recorded": N}``, with ``"presses": [{"button", "status",
  "tell"?}]`` when the payload held taps
  (``status`` 200 decided, 403 not allowed, 409 decided already, 404 unknown here: WhatsApp has no way to tell the
  person privately, so the outcome is logged and answered to a forwarding bot). The store or the journal failing, or
  a tap that cannot be decided now (its run's partition moving between replicas: a 503), is
  500: Meta delivers the webhook again (up to 7 days, https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks),
  and a press decided already is then a 409. The route does nothing else, so it answers fast.

On Redis replicas Meta posts to one URL, which any replica may answer, and a run's approvals are decided by the
replica that owns its partition. A tap whose run another replica owns (``owner_of``) is posted on to that replica's
webhook: the same body with its ``X-Hub-Signature-256`` (every replica holds the app secret, so the owner checks it
as Meta's own), marked with :data:`FORWARDED`; the owner records the statuses again (a receipt is kept once: the
strongest status) and decides the taps whose run it owns or nobody knows (404); a tap of a run a third replica owns
(Meta batches taps of several people in one webhook) is answered 503 :data:`NOT_MINE`, never decided there and never
posted on again. The owner's answer for each tap posted on is this answer's, but a 503 (the run moved meanwhile),
an answer that does not say what became of the tap (no number for its status, the tap missing) or an owner that
cannot be found or reached now is a 500, so Meta sends the webhook again (a tap decided already is
then a 409).

The app secret and the verify token are held as :class:`pydantic.SecretStr`: never in a repr, a log or an answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from pydantic import SecretStr
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from streamrelay.adapters.capped_body import read_capped
from streamrelay.adapters.whatsapp.errors import PLATFORM
from streamrelay.core.errors import IngestError
from streamrelay.core.lanes.pipeline import strict_loads
from streamrelay.core.records.receipts import Receipt, Receipts, ReceiptStatus
from streamrelay.core.run.approvals import DecisionRefused

Decide = Callable[[str, str, str, str], Awaitable[dict[str, Any]]]
"""``decide(run16, id16, decision, by)``: the approvals path (:meth:`core.run.relay.Relay.decide_approval`)."""
OwnerOf = Callable[[str], Awaitable[str | None]]
"""``owner_of(run16)``: the base URL (``http://host:port``) of the replica that decides run ``run16``'s approvals,
or None to decide them here (this replica owns the run, or nobody knows it); raises when it cannot be told now."""
FORWARDED = "x-streamrelay-forwarded"
"""Marks a webhook one replica posted on to another (never posted on again); the owner proxy's mark, the same name
(adapters/ingest_http/owner_proxy.py: adapters do not import each other)."""
NOT_MINE = "not this replica's run: decided by the replica that posted the webhook on, or its owner"
"""The ``tell`` of a forwarded webhook's tap whose run the receiving replica does not own (status 503): Meta batches
taps of several runs in one webhook, and each is decided by its own run's owner."""
FORWARD_TIMEOUT_S = 10.0
"""How long an owner may take to answer a forwarded webhook (seconds); Meta waits about 20. The owners of one
webhook's taps are posted to at once, so the whole wait is one of these, however many owners."""
PRESS_ID = re.compile(r"^(approve|deny):([0-9a-f]{16}):([0-9a-f]{16})$")

WEBHOOK_PATH = "/v1/platforms/whatsapp/webhook"
SIGNATURE_HEADER = "X-Hub-Signature-256"
MAX_BODY_BYTES = 3 * 1024 * 1024
"""Meta's webhook payloads are at most 3 MB (https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks)."""
_log = logging.getLogger(__name__)


def signature(app_secret: str, body: bytes) -> str:
    """``X-Hub-Signature-256``'s value for ``body``: ``sha256=`` and the hex HMAC-SHA256 with the app secret."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def signed_by(app_secret: str, body: bytes, header: str | None) -> bool:
    """True when ``header`` is ``body``'s signature with ``app_secret`` (compared in constant time, as bytes: a
    non-ASCII header is a plain mismatch, never an error)."""
    return header is not None and hmac.compare_digest(signature(app_secret, body).encode(), header.strip().encode())


def receipts_of(payload: Any, now_s: float) -> list[Receipt]:
    """The receipts in a webhook payload (``{"object": "whatsapp_business_account", "entry": [{"changes":
    [{"field": "messages", "value": {"statuses": [...]}}]}]}``): one per status with an ``id``, a known ``status``
    and a ``biz_opaque_callback_data``; anything else in the payload is skipped (never an error: Meta sends more
    kinds than these)."""
    found: list[Receipt] = []
    entries = payload.get("entry") if isinstance(payload, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        changes = entry.get("changes") if isinstance(entry, dict) else None
        for change in changes if isinstance(changes, list) else []:
            value = change.get("value") if isinstance(change, dict) else None
            statuses = value.get("statuses") if isinstance(value, dict) else None
            for status in statuses if isinstance(statuses, list) else []:
                receipt = _receipt(status, now_s)
                if receipt is not None:
                    found.append(receipt)
    return found


def presses_of(payload: Any) -> list[tuple[str, str]]:
    """The approval button taps in a webhook payload: ``(button id, whatsapp:user:<from>)`` for each ``messages[]``
    entry of ``type: interactive`` whose ``interactive.button_reply.id`` is an approval button's id."""
    found: list[tuple[str, str]] = []
    entries = payload.get("entry") if isinstance(payload, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        changes = entry.get("changes") if isinstance(entry, dict) else None
        for change in changes if isinstance(changes, list) else []:
            value = change.get("value") if isinstance(change, dict) else None
            messages = value.get("messages") if isinstance(value, dict) else None
            for message in messages if isinstance(messages, list) else []:
                if not isinstance(message, dict) or message.get("type") != "interactive":
                    continue
                interactive = message.get("interactive")
                reply = interactive.get("button_reply") if isinstance(interactive, dict) else None
                button = reply.get("id") if isinstance(reply, dict) else None
                sender = message.get("from")
                if (
                    isinstance(button, str)
                    and PRESS_ID.match(button)
                    and isinstance(sender, str)
                    and sender.isascii()
                    and sender.isdigit()
                ):
                    found.append((button, f"whatsapp:user:{sender}"))
    return found


def _receipt(status: Any, now_s: float) -> Receipt | None:
    if not isinstance(status, dict):
        return None
    delivery_id, message_id, state = (status.get(k) for k in ("biz_opaque_callback_data", "id", "status"))
    if not isinstance(delivery_id, str) or not delivery_id or not isinstance(message_id, str):
        return None
    try:
        kind = ReceiptStatus(str(state))
    except ValueError:
        return None
    code = None
    errors = status.get("errors")
    if kind is ReceiptStatus.FAILED and isinstance(errors, list) and errors and isinstance(errors[0], dict):
        raw = errors[0].get("code")
        code = raw if isinstance(raw, int) else None
    return Receipt(delivery_id, kind, message_id, code, now_s)


class WhatsAppWebhook:
    """The webhook's two routes (module docstring).

    Args:
        receipts: where statuses are recorded.
        app_secret: the Meta app's secret (``WHATSAPP_APP_SECRET``): signs every POST.
        verify_token: the verify token set in the App Dashboard (``WHATSAPP_VERIFY_TOKEN``); None: the GET
            verification answers 403 (the operator verifies the URL with the token set).
        clock: Unix seconds for the receipts' ``recorded_at_s``.
        decide: the approvals path a reply-button tap is decided through (None: taps are ignored).
        owner_of: where a tap's run is decided (Redis replicas: module docstring); None: always here.
    """

    def __init__(
        self,
        receipts: Receipts,
        app_secret: SecretStr,
        verify_token: SecretStr | None = None,
        *,
        clock: Callable[[], float] = time.time,
        decide: Decide | None = None,
        owner_of: OwnerOf | None = None,
    ) -> None:
        self.receipts = receipts
        self.decide = decide
        self.owner_of = owner_of
        self._secret = app_secret
        self._verify = verify_token
        self._clock = clock

    def __repr__(self) -> str:
        return f"WhatsAppWebhook({WEBHOOK_PATH}, receipts={self.receipts!r})"

    def routes(self) -> list[BaseRoute]:
        """``GET`` (verification) and ``POST`` (statuses) on :data:`WEBHOOK_PATH`."""
        return [
            Route(WEBHOOK_PATH, self.verify, methods=["GET"]),
            Route(WEBHOOK_PATH, self.statuses, methods=["POST"]),
        ]

    async def verify(self, request: Request) -> Response:
        """Meta's verification request: ``hub.challenge`` back when ``hub.verify_token`` is ours."""
        query = request.query_params
        token = query.get("hub.verify_token", "")
        expected = self._verify.get_secret_value() if self._verify is not None else ""
        if (
            query.get("hub.mode") != "subscribe"
            or not expected
            or not hmac.compare_digest(token.encode(), expected.encode())
        ):
            why = (
                "no verify token is configured: set WHATSAPP_VERIFY_TOKEN to the App Dashboard's Verify Token"
                if not expected
                else "hub.mode must be subscribe and hub.verify_token the configured verify token"
            )
            return JSONResponse({"error": why}, 403)
        return PlainTextResponse(query.get("hub.challenge", ""))

    async def statuses(self, request: Request) -> Response:
        """Record the statuses of a signed webhook (module docstring)."""
        body = await read_capped(request, MAX_BODY_BYTES)
        if body is None:  # not read further: the signature cannot be checked before the body is read
            return JSONResponse({"error": f"the body is over {MAX_BODY_BYTES} bytes"}, 413)
        if not signed_by(self._secret.get_secret_value(), body, request.headers.get(SIGNATURE_HEADER)):
            why = (
                f"no {SIGNATURE_HEADER} header"
                if SIGNATURE_HEADER.lower() not in request.headers
                else f"{SIGNATURE_HEADER} does not match the body: it must be sha256=HMAC-SHA256(body) with the "
                "Meta app's secret (WHATSAPP_APP_SECRET here)"
            )
            _log.warning("whatsapp webhook refused: %s", why)
            return JSONResponse({"error": why}, 401)
        try:  # strictly (nesting past MAX_JSON_DEPTH was a RecursionError and a 500, which Meta sends again)
            payload = strict_loads(body)
        except ValueError as exc:
            return JSONResponse({"error": f"the body is not strict JSON: {exc}"}, 400)
        found = receipts_of(payload, self._clock())
        if found:
            try:
                await self.receipts.record(PLATFORM, found)
            except Exception:  # Meta delivers it again: nothing is lost by answering 500
                _log.exception("whatsapp webhook: recording %d statuses failed (Meta sends them again)", len(found))
                return JSONResponse({"error": "the statuses could not be recorded: send again"}, 500)
        presses = await self._taps(
            payload, body, request.headers.get(SIGNATURE_HEADER, ""), FORWARDED in request.headers
        )
        if isinstance(presses, str):
            return JSONResponse({"error": presses}, 500)
        return JSONResponse({"recorded": len(found), **({"presses": presses} if presses else {})})

    async def _taps(self, payload: Any, body: bytes, signature: str, forwarded: bool) -> list[dict[str, Any]] | str:
        """Decide the payload's taps here or at their runs' owners (module docstring): each tap's outcome, or why
        the webhook must come again (a 500)."""
        presses: list[dict[str, Any]] = []
        elsewhere: dict[str, list[int]] = {}  # an owner's URL: the indexes in presses of the taps it decides
        for button, by in presses_of(payload) if self.decide is not None else []:
            owner = await self._owner(button)
            if owner == "":
                return "the run's owner is not known now: send again"
            if owner is not None and forwarded:  # another replica's tap in a batch: the forwarding one decides it
                presses.append({"button": button, "status": 503, "tell": NOT_MINE})
                continue
            if owner is not None:
                elsewhere.setdefault(owner, []).append(len(presses))
                presses.append({"button": button, "status": 404})
                continue
            outcome = await self._press(button, by)
            if outcome is None:
                return "the decision could not be taken now: send again"
            presses.append(outcome)
        owners = list(elsewhere)  # posted on to every owner at once: Meta waits about 20 s for the whole answer
        answers = await asyncio.gather(*(self._forward(owner, body, signature) for owner in owners))
        for owner, answered in zip(owners, answers, strict=True):
            indexes = elsewhere[owner]
            if answered is None:
                return "the run's owner did not answer: send again"
            for index in indexes:
                said = answered.get(presses[index]["button"])
                if said is None:  # the owner did not say what became of it: never a 200 on a guess
                    _log.warning(
                        "whatsapp webhook: the owner %s did not answer for %s", owner, presses[index]["button"]
                    )
                    return "the run's owner did not answer for every tap: send again"
                if said["status"] >= 500:  # its owner moved meanwhile: Meta sends it again
                    return "the run's owner changed: send again"
                presses[index] = said
        return presses

    async def _owner(self, button: str) -> str | None:
        """The URL of the replica that decides ``button``'s run, None for here, ``""`` when it cannot be told now."""
        match = PRESS_ID.match(button)
        if self.owner_of is None or match is None:
            return None
        try:
            return await self.owner_of(match.group(2))
        except Exception as exc:  # a takeover under way, Redis away: Meta sends the webhook again
            _log.warning("whatsapp press %s: its run's owner is not known now (%s)", button, type(exc).__name__)
            return ""

    async def _forward(self, owner: str, body: bytes, signature: str) -> dict[str, dict[str, Any]] | None:
        """Post the signed webhook on to ``owner``'s webhook (module docstring): its ``presses`` by button (those
        with a number for a status), or None when it did not answer 200 with a list of them."""
        headers = {SIGNATURE_HEADER: signature, FORWARDED: "1", "Content-Type": "application/json"}
        try:
            async with httpx.AsyncClient(timeout=FORWARD_TIMEOUT_S) as client:
                answer = await client.post(owner + WEBHOOK_PATH, content=body, headers=headers)
            presses = answer.json().get("presses", []) if answer.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            _log.warning("whatsapp webhook: the owner %s did not answer (%s)", owner, type(exc).__name__)
            return None
        if not isinstance(presses, list):
            _log.warning("whatsapp webhook: the owner %s answered %d", owner, answer.status_code)
            return None
        return {
            p["button"]: p
            for p in presses
            if isinstance(p, dict)
            and isinstance(p.get("button"), str)
            and isinstance(p.get("status"), int)
            and not isinstance(p["status"], bool)
        }

    async def _press(self, button: str, by: str) -> dict[str, Any] | None:
        """Decide one tap (module docstring); None when the journal failed (the webhook answers 500)."""
        match = PRESS_ID.match(button)
        if match is None or self.decide is None:
            return {"button": button, "status": 404}
        decision, run16, id16 = match.groups()
        try:
            answer = await self.decide(run16, id16, decision, by)
        except DecisionRefused as refused:
            _log.info("whatsapp press %s by %s refused: %s", button, by, refused.error)
            return {"button": button, "status": refused.status, "tell": refused.tell}
        except IngestError as exc:
            if exc.status >= 500:  # not decided now (a partition moving between replicas): Meta sends it again
                _log.warning("whatsapp press %s by %s not decided now: %s", button, by, exc)
                return None
            return {"button": button, "status": exc.status, "tell": str(exc)}
        except Exception:  # the journal: nothing was decided; Meta sends the webhook again
            _log.exception("whatsapp press %s by %s could not be decided", button, by)
            return None
        return {"button": button, "status": 200, "decision": answer.get("decision")}
