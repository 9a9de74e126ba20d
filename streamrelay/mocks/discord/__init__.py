"""A mock Discord REST API (v10) server: real HTTP on loopback, strict like Discord, every call recorded.

discord.py talks to it unchanged (``Route.BASE`` is a class attribute: process-wide)::

    async with MockDiscord() as mock:
        discord.http.Route.BASE = mock.base_url          # http://127.0.0.1:PORT/api/v10
        client = discord.Client(intents=discord.Intents.none())
        await client.login("MTIz...NTY.GhJkLm.s3cr3t...")  # GET /users/@me, GET /oauth2/applications/@me
        await client.get_partial_messageable(1234).send("hi")

Routes (under ``/api/v10``; Discord's documentation names are the recorded method names):

=============================================================  =======================================
``GET /users/@me``                                             ``getCurrentUser``
``GET /oauth2/applications/@me``                               ``getCurrentBotApplicationInformation``
``POST /channels/{channel_id}/messages``                       ``createMessage``
``PATCH /channels/{channel_id}/messages/{message_id}``         ``editMessage``
``DELETE /channels/{channel_id}/messages/{message_id}``        ``deleteMessage``
``POST /channels/{channel_id}/typing``                         ``triggerTypingIndicator``
``POST /channels/{channel_id}/messages/{message_id}/threads``  ``startThreadFromMessage``
``POST /webhooks/{id}/{token}[?wait=true][&thread_id=]``       ``executeWebhook``
``PATCH /webhooks/{id}/{token}/messages/{message_id}``         ``editWebhookMessage``
``DELETE /webhooks/{id}/{token}/messages/{message_id}``        ``deleteWebhookMessage``
=============================================================  =======================================

An unknown path is 404 ``{"code": 0, "message": "404: Not Found"}``, a known path with another HTTP method 405.
Bot routes need ``Authorization: Bot <token>`` with a token shaped like Discord's (three dot-separated base64url
parts, the first the bot's user id in base64), else 401 ``{"message": "401: Unauthorized", "code": 0}``; the
id in the token is the bot's user id and the author of what it sends. Webhooks (:meth:`MockDiscord.add_webhook`)
need no header: an unknown id is 404 10015, a wrong token 401 50027.

What it reproduces (https://discord.com/developers/docs/resources/message#create-message, error codes:
https://discord.com/developers/docs/topics/opcodes-and-status-codes#json):

- Ids are snowflakes (strings of digits, increasing). Any snowflake channel exists except those in
  :attr:`MockDiscord.missing_channels` (404 10003 ``Unknown Channel``); a thread is a channel of its own.
  A path id that is not a snowflake is 400 50035 ``NUMBER_TYPE_COERCE``.
- ``content`` is stored exactly as sent (what a person sees: Discord renders its Markdown). More than 2000
  characters (code points) is 400 50035 with ``errors.content._errors[0].code`` ``BASE_TYPE_MAX_LENGTH``; no
  content (missing, empty or only whitespace) and no embeds is 400 50006 ``Cannot send an empty message``.
  A body that is not a JSON object is 400 50109.
- Edits change only the fields sent; an unchanged edit is 200 (Discord has no "not modified"). Editing or
  deleting an unknown or deleted message is 404 10008 ``Unknown Message``; editing a message of another
  author is 403 50005, deleting one 403 50013 ``Missing Permissions`` (the bot lacks Manage Messages).
- ``message_reference`` to a missing message is 400 50035 ``MESSAGE_REFERENCE_UNKNOWN_MESSAGE`` unless
  ``fail_if_not_exists`` is false (then the message is sent as no reply). The referenced message must be in
  the same channel.
- ``allowed_mentions`` is validated and decides who is pinged: without it every ``@everyone`` / ``@here`` /
  ``<@id>`` in the content pings (see :attr:`StoredMessage.mention_everyone`, ``mentions``).
- Threads (:mod:`mocks.discord.threads`): Start Thread from Message creates a public thread (type 11) whose id
  is the message's; it is a channel of its own (messages are created and edited under its id, and read with
  :meth:`MockDiscord.messages`); :meth:`MockDiscord.threads` lists them. A message with a thread already is
  400 160004, a message inside a thread 400 50024, a name not 1-100 characters 400 50035.
- ``nonce`` is an integer or a string of at most 25 characters (else 400 50035 ``NONCE_TYPE_INVALID_TYPE`` /
  ``NONCE_TYPE_TOO_LONG``), echoed in the message object. With ``enforce_nonce: true``, a create whose nonce the
  same author used in that channel within 10 minutes ("the past few minutes") answers the earlier message (200,
  the same JSON) and creates nothing; if that message was deleted since, 404 10008. discord.py's
  ``Messageable.send`` always sends both (``nonce=`` given, else a random 64-bit integer, as a string).

Rate limits (https://discord.com/developers/docs/topics/rate-limits; numbers in :class:`DiscordLimits`): every
answer carries ``Via: 1.1 google``; every authenticated one also its bucket's ``X-RateLimit-Limit``,
``-Remaining``, ``-Reset``, ``-Reset-After`` and ``-Bucket`` headers (the login routes included: they have a
bucket and count toward the global limit). Enforced only with ``rate_limits=True`` (otherwise every answer
shows a fresh window, so a client pacing itself by the headers never waits): past a bucket the answer is 429
``{"message": "You are being rate limited.", "retry_after": <float s>, "global": false}`` with ``Retry-After``
(whole seconds, rounded up), ``X-RateLimit-Scope: user`` and the bucket headers (``Remaining: 0``); past the
global 50 per second per bot it is the same body with ``"global": true``, ``X-RateLimit-Global: true`` and
``X-RateLimit-Scope: global``. Every 429 carries ``Via``: discord.py takes a 429 without it for a Cloudflare
ban. A refused call costs nothing.

Scripted faults and latencies use the method names above (:class:`mocks.common.FaultScript`): a 429 fault
answers the 429 shape (``global`` false, scope ``user``), a status >= 500 that status with
``{"code": 0, "message": description or phrase}``, another 4xx its Discord error with the description as
message (:func:`mocks.discord.wire.fault_error`). Per call, in order: record the call, check auth, count it
(per method, 1-based), wait its scripted latency, apply its scripted fault, validate, check rate limits, store,
answer. A recorded call's ``chat_id`` is the channel id (the webhook's channel for webhooks), ``message_id``
the new id of a stored message else the requested one, ``text`` the ``content`` as sent.
"""

from streamrelay.mocks.discord.limits import Bucket, DiscordLimits
from streamrelay.mocks.discord.routes import METHODS
from streamrelay.mocks.discord.server import MockDiscord, serve_forever
from streamrelay.mocks.discord.threads import Thread
from streamrelay.mocks.discord.wire import MAX_CONTENT_CHARS, PERSON_USER_ID, StoredMessage, fault_error

__all__ = [
    "MAX_CONTENT_CHARS",
    "METHODS",
    "PERSON_USER_ID",
    "Bucket",
    "DiscordLimits",
    "MockDiscord",
    "StoredMessage",
    "Thread",
    "fault_error",
    "serve_forever",
]
