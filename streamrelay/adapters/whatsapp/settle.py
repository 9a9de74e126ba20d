"""How an unknown WhatsApp create is settled: by its status webhook (the rule, pure; the waiting is
:meth:`adapters.whatsapp.adapter.WhatsAppAdapter.settle_send`).

The Cloud API has no idempotency key and no call that lists a number's messages, so a create whose answer was lost
(a timeout, a 5xx, a reset, a kill -9 mid-call) cannot be read back. What it has: every create carries
``biz_opaque_callback_data`` (the sidecar puts its delivery id there), and the Cloud API echoes it in the ``statuses``
webhooks of that message: ``sent``, ``delivered``, ``read``, or ``failed``
(https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages: "Cloud API does not process this field,
it just returns it as part of sent/delivered/read message webhooks"; the payload:
https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/components). The sidecar records each one
(:mod:`adapters.whatsapp.webhook`, :mod:`core.records.receipts`), and :func:`decide` reads them:

=========================================================  ==============================================
what the receipts say                                      settlement
=========================================================  ==============================================
``sent`` / ``delivered`` / ``read`` for the delivery id    ``found``: landed; its ``wamid`` is the message id,
                                                           never sent again
``failed`` for the delivery id                             ``not_sent``: not landed; the core sends it again,
                                                           and that send's own answer decides (a refusal that
                                                           lasts, 131047 say, fails the part there)
nothing yet, inside the settle window                      wait (poll the receipts again)
nothing in the window, and a status of another message     ``not_sent``: sent again (below)
of this platform was heard in the :data:`FLOWING_S`
before the settle began, or during it (the webhooks
reach the sidecar)
nothing in the window, and no status heard that recently   ``unknown``: reported uncertain, never sent blind
=========================================================  ==============================================

Why silence is "not stored" when the webhooks are known to flow: the Cloud API reports every message it accepted with
a ``sent`` status (or ``failed``) a moment later, and a webhook the sidecar did not take (down, killed, a 5xx) is
delivered again with decreasing frequency for up to 7 days
(https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks: "If we send a webhook request to your endpoint
and your server responds with an HTTP status code other than 200, or if we are unable to deliver the webhook for
another reason, we will keep trying with decreasing frequency until the request succeeds, for up to 7 days"). So
while other statuses arrive within the window, the missing one is a message that was never stored; sending it again
is not blind. The proof is a status heard in the :data:`FLOWING_S` (10 minutes) before the settle began, or while it
waited: not only within the window, because after a restart (a kill -9 mid-call) the statuses heard before the kill
are minutes old by the time the journal resumes, and a run alone on its number has no other traffic to prove it.
Without that proof (no webhook configured, or none heard for 10 minutes: the webhook may be broken, its secret
rotated), silence proves nothing and the create stays uncertain, reported.

On replicas the proof must come from a replica that is alive now: Meta posts to one URL, and when that URL reaches a
replica that died (no load balancer in front of them, or it names one replica), the statuses of the messages stored
since are retried at a dead address while the other replicas hear nothing. So :meth:`Receipts.last_heard_s` counts
the receipts recorded by replicas whose heartbeat lives (:class:`adapters.redis.receipts.RedisReceipts`); one
process (SQLite) is its own receiver, alive while it settles. Point the webhook at every replica (the load balancer
in front of ingest; docs/replicas.md), so that a replica's death does not stop them.

The residual risks, stated: a ``sent`` status that Meta holds back longer than the window while it delivers others;
a webhook that broke within the last 10 minutes; on replicas, a receiver killed less than a heartbeat's time
(``lease_ttl_s``) before a settle ended.
The window (``settle_window_ms``, default 30 s) is what an operator trades against it; a status that arrives after
its create was sent again is still recorded, and the desk shows the part (:mod:`core.run.desk`).
"""

from __future__ import annotations

from streamrelay.core.ports import Settlement, SettleOutcome
from streamrelay.core.records.receipts import Receipt

FLOWING_S = 600.0
"""A status heard this long before a settle began (or while it waited) proves the webhooks reach the sidecar."""


def decide(
    receipt: Receipt | None, *, started_at_s: float, now_s: float, window_s: float, last_heard_s: float | None
) -> Settlement | None:
    """The settlement the receipts allow now (module docstring's table), or None to wait and look again.

    Args:
        receipt: the delivery id's receipt, None when none was heard.
        started_at_s: when this settle began (Unix seconds).
        now_s: now (Unix seconds).
        window_s: the settle window (seconds).
        last_heard_s: when the newest receipt of the platform was recorded (Unix seconds), None when never.
    """
    if receipt is not None:
        if receipt.landed:
            return Settlement(SettleOutcome.FOUND, receipt.message_id)
        return Settlement(SettleOutcome.NOT_SENT)
    if now_s - started_at_s < window_s:
        return None
    flowing = last_heard_s is not None and last_heard_s >= started_at_s - max(window_s, FLOWING_S)
    return Settlement(SettleOutcome.NOT_SENT if flowing else SettleOutcome.UNKNOWN)
