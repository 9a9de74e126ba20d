"""A mock WhatsApp Cloud API (Graph API ``POST /{version}/{phone-number-id}/messages``): real HTTP on loopback,
strict like the documentation, every call recorded.

pywa talks to it unchanged (:class:`adapters.whatsapp.connection.WhatsAppConnection` moves its requests here).

Routes (one method name, ``messages``, for faults and latencies, tests/cases/README.md):

===================================================  ============
``POST /{version}/{phone-number-id}/messages``        ``messages``
===================================================  ============

A version not shaped ``vNN.N`` or a phone number id not of digits is 400 code 100; no ``Authorization: Bearer`` is
code 190 (400), a token not shaped like a Meta access token (``EAA`` and 20+ letters and digits) code 190 (401).
Errors have the Graph API's shape ``{"error": {"message", "type", "code", "error_data": {"details"},
"fbtrace_id"}}`` (https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes).

What it reproduces (https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages):

- ``messaging_product`` must be ``whatsapp`` (100). ``to`` a user id of digits (100).
- Text: ``text.body`` non-empty, at most 4,096 characters (100 naming the limit,
  https://developers.facebook.com/docs/whatsapp/cloud-api/messages/text-messages).
- Media by link: ``image``, ``document``, ``audio``, ``video`` with an http(s) ``link`` (131009 otherwise), a
  ``caption`` of at most 1,024 characters, none on audio (100). Another ``type`` is 131051.
- No edits, no deletes, no idempotency: every accepted send is a new message; a send repeated is a second copy.
- The customer service window: a user in :attr:`MockWhatsApp.closed_windows` (their last message is more than 24
  hours old) gets 131047 "Re-engagement message"; a message the person writes (:meth:`MockWhatsApp.user_message`)
  opens it (https://developers.facebook.com/docs/whatsapp/cloud-api/guides/send-messages#customer-service-windows).
- Templates (https://developers.facebook.com/docs/whatsapp/cloud-api/guides/send-message-templates): ``type:
  template`` may be sent in a closed window; only an approved one (:attr:`MockWhatsApp.templates`, by name and
  language code; ``streamrelay_answer_waiting`` ``en_US`` with one variable is known) is taken: another is 132001, a
  body parameter count that differs 132000, a parameter with a newline, a tab or five spaces 132018
  (https://developers.facebook.com/documentation/business-messaging/whatsapp/support/error-codes/). It shows its
  body with the parameters filled in.
- Read and typing: ``{"status": "read", "message_id", "typing_indicator": {"type": "text"}}`` on a message the person
  wrote answers ``{"success": true}`` (:meth:`MockWhatsApp.typing_for`); another id is 100
  (https://developers.facebook.com/documentation/business-messaging/whatsapp/typing-indicators/). These calls count
  as ``messages`` calls for scripted faults.
- Rate limits (when on, :class:`WhatsAppLimits`): 80 messages a second per business number (130429) and the pair
  limit, one message every 6 s to one user with bursts of up to 45 (131056), both HTTP 400 as Meta answers them.

Scripted faults use the method name ``messages`` (:class:`mocks.common.FaultScript`): a description ``CODE: text``
chooses the error code (``{"status": 400, "description": "131047: Re-engagement message"}``); else a 429 is 130429,
a 5xx 131000, another status 100. Per call, in order: record, check the path, the token and the body's
JSON, count, wait its latency, apply its fault, then validate, the window, rate limits, store, answer. A
recorded call's ``chat_id`` is ``to``, ``message_id`` the new ``wamid.…``, ``text`` the body (a media item's
caption).
"""

from streamrelay.mocks.whatsapp.server import (
    MAX_TEXT,
    METHODS,
    GraphError,
    MockWhatsApp,
    StoredMessage,
    WhatsAppLimits,
    fault_error,
    serve_forever,
)

__all__ = [
    "MAX_TEXT",
    "METHODS",
    "GraphError",
    "MockWhatsApp",
    "StoredMessage",
    "WhatsAppLimits",
    "fault_error",
    "serve_forever",
]
