"""Read tokens: who may watch a run's live page and stream.

A run's read token is an HMAC-SHA256 of the run id under the sidecar's secret (its ingest token), so it needs no
storage, differs per run, cannot be guessed from the run id, and reveals nothing of the secret. Whoever can send a
run's events (the ingest token) can hand out a watch link for it (``GET /v1/runs/{run}/watch``); a watcher of one
run cannot watch another. Compared in constant time.

Stopping a run is a separate permission: its stop token is an HMAC of the run id under another key derived from the
same secret, handed out only when asked for (``GET /v1/runs/{run}/watch?stop=1`` puts it in the link as
``&stop=…``). A read token never allows a stop, and a stop token never allows reading; a page whose link carries
both shows a Stop button (adapters/web/stop.py).

Deciding an approval on the live page is a third permission, bound to a person: a run's decide token for viewer
``V`` (a platform user id like ``web:user:alice``, the form approvers are named in) is an HMAC of the run id and
``V`` under a third derived key, handed out only when asked for (``GET /v1/runs/{run}/watch?as=V`` puts
``&viewer=V&decide=…`` in the link). The page then decides as ``V`` and nobody else: whether ``V`` may decide a given
approval is the approval's (its ``approvers``, or the channel's ``approvals_anyone``: adapters/web/approvals.py). A
read or stop token never decides; a decide token for one viewer or run never serves another.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import quote


class ReadTokens:
    """Per-run read tokens under one secret.

    Args:
        secret: the sidecar's secret (never shown: not in the repr, not in any answer).
    """

    def __init__(self, secret: str) -> None:
        self._key = hashlib.sha256(b"streamrelay read token\x00" + secret.encode()).digest()
        self._stop_key = hashlib.sha256(b"streamrelay stop token\x00" + secret.encode()).digest()
        self._decide_key = hashlib.sha256(b"streamrelay decide token\x00" + secret.encode()).digest()

    def __repr__(self) -> str:
        return "ReadTokens()"

    def token(self, run: str) -> str:
        """The read token of ``run``: 32 hex characters."""
        return hmac.new(self._key, run.encode(), hashlib.sha256).hexdigest()[:32]

    def allows(self, run: str, token: str | None) -> bool:
        """True when ``token`` is ``run``'s read token."""
        return token is not None and hmac.compare_digest(self.token(run).encode(), token.encode())

    def stop_token(self, run: str) -> str:
        """The stop token of ``run`` (the permission to stop it from its live page): 32 hex characters."""
        return hmac.new(self._stop_key, run.encode(), hashlib.sha256).hexdigest()[:32]

    def allows_stop(self, run: str, token: str | None) -> bool:
        """True when ``token`` is ``run``'s stop token."""
        return token is not None and hmac.compare_digest(self.stop_token(run).encode(), token.encode())

    def decide_token(self, run: str, viewer: str) -> str:
        """The decide token of ``viewer`` (a platform user id, ``web:user:alice``) on ``run``: 32 hex characters
        (module docstring)."""
        data = run.encode() + b"\x00" + viewer.encode()
        return hmac.new(self._decide_key, data, hashlib.sha256).hexdigest()[:32]

    def allows_decide(self, run: str, viewer: str, token: str | None) -> bool:
        """True when ``token`` is ``viewer``'s decide token on ``run``."""
        return token is not None and hmac.compare_digest(self.decide_token(run, viewer).encode(), token.encode())

    def query(self, run: str, *, stop: bool = False, viewer: str | None = None) -> str:
        """The query of ``run``'s live page link: ``token=…``, after ``stop=…&`` when ``stop`` and
        ``viewer=…&decide=…&`` when ``viewer`` (URL-encoded; ``token`` always last)."""
        decide = "" if viewer is None else f"viewer={quote(viewer, safe='')}&decide={self.decide_token(run, viewer)}&"
        return decide + (f"stop={self.stop_token(run)}&" if stop else "") + f"token={self.token(run)}"
