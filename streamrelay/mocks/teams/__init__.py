"""A mock Microsoft Teams (the Bot Framework Connector as Teams runs it, and the token endpoint): real HTTP on
loopback, strict like the documentation, every call recorded.

The Teams SDK for Python talks to it unchanged: the mock is the conversations' ``serviceUrl`` and its login endpoint
(:mod:`adapters.teams.connection`)::

    async with MockTeams() as mock:
        adapter = TeamsAdapter("00000000-0000-4000-8000-0000000000b7:secret", base_url=mock.base_url)
        await adapter.send_text(Target(chat_id="19:room@thread.v2"), "hi", TextFormat.MARKDOWN)

Routes (recorded method names in the second column; tests/cases/README.md names the first four):

=======================================================================  ======================
``POST /v3/conversations/{conversationId}/activities``                    ``sendToConversation``
``POST /v3/conversations/{conversationId}/activities`` with ``replyToId`` ``replyToActivity``
``POST /v3/conversations/{conversationId}/activities/{activityId}``       ``replyToActivity``
``PUT /v3/conversations/{conversationId}/activities/{activityId}``        ``updateActivity``
``DELETE /v3/conversations/{conversationId}/activities/{activityId}``     ``deleteActivity``
``POST /{tenant}/oauth2/v2.0/token``                                      ``token``
=======================================================================  ======================

What it reproduces:

- The token: the OAuth client credentials grant with a GUID ``client_id``, a secret and the scope
  ``https://api.botframework.com/.default`` gets a bearer token (else 400/401 as Entra ID answers); every Connector
  route needs one of its tokens (401 ``Unauthorized``), https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-authentication.
- Conversations: ``a:…`` personal chats, ``19:…@thread.v2`` group chats, ``19:…@thread.tacv2`` channels (any
  well-formed id exists, except :attr:`MockTeams.missing`: 403 ``BotNotInConversationRoster``); reply chains
  (``replyToId``) only in channels, to an existing root.
- A message activity needs ``text`` or an attachment (400 ``BadArgument``); the whole activity's JSON in UTF-16 at most
  102,400 bytes (413 ``MessageSizeTooBig``, https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/format-your-bot-messages).
- Update and delete: of the bot's own activities only (403), of an existing one (404 ``ActivityNotFound``); a deleted
  activity is gone from :meth:`MockTeams.visible`. Updates replace the whole activity
  (https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/update-and-delete-bot-messages).
- Native streaming (https://learn.microsoft.com/en-us/microsoftteams/platform/bots/streaming-ux): only in personal
  chats and one stream at a time (403 ``ContentStreamNotAllowed`` "Content stream is not allowed"); a start is a
  ``typing`` activity with a ``streaminfo`` entity (``informative`` or ``streaming``) and text, answered with the
  stream's id, its ``streamSequence`` 1 (else 400); each update names the ``streamId`` with an increasing
  ``streamSequence`` (else 202 ``ContentStreamSequenceOrderPreConditionFailed``, dropped), a streaming update contains
  the text streamed before (else 403); an informative update is at most 1,000 characters; the ``final`` message
  activity, without a ``streamSequence`` (else 400), ends it; a streaming activity past the size limit is 403 "Message
  size too large"; past two minutes 403 "Content stream finished due to exceeded streaming time.", after the final 403
  "... already completed streamed message"; a deleted stream is ended (the chat may stream again); with rate limits
  on, an update less than a second after the stream's last request is 429 "API calls quota exceeded".
- Rate limits (when on), every call counted: per bot per thread 7 in 1 s, 8 in 2 s, 60 in 30 s, 1,800 in an hour;
  per app 50 a second: 429 ``Throttled`` with ``Retry-After`` (whole seconds)
  (https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/rate-limit).
- Cards: an Adaptive Card is shown as Markdown again (TextBlocks, CodeBlocks fenced, Tables as pipe tables);
  :meth:`MockTeams.press` presses one of its ``Action.Submit`` buttons.

Scripted faults and latencies use the method names above (:class:`mocks.common.FaultScript`): a description
``Code: message`` chooses the error's code and message; a 429 carries ``Retry-After``. Per call, in order: record,
check the token, count (per method, 1-based), wait its latency, apply its fault, then validation, rate limits, store,
answer; an ``after_commit`` fault stores first (a store-then-fail).
"""

from streamrelay.mocks.teams.server import (
    MESSAGE_BYTES,
    METHODS,
    ConnectorError,
    MockTeams,
    StoredActivity,
    TeamsLimits,
    fault_error,
    serve_forever,
    shown_text,
)

__all__ = [
    "MESSAGE_BYTES",
    "METHODS",
    "ConnectorError",
    "MockTeams",
    "StoredActivity",
    "TeamsLimits",
    "fault_error",
    "serve_forever",
    "shown_text",
]
