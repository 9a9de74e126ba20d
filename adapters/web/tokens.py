"""Read tokens: who may watch a run's live page and stream.

A run's read token is an HMAC-SHA256 of the run id under the sidecar's secret (its ingest token), so it needs no
storage, differs per run, cannot be guessed from the run id, and reveals nothing of the secret. Whoever can send a
run's events (the ingest token) can hand out a watch link for it (``GET /v1/runs/{run}/watch``); a watcher of one
run cannot watch another. Compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac


class ReadTokens:
    """Per-run read tokens under one secret.

    Args:
        secret: the sidecar's secret (never shown: not in the repr, not in any answer).
    """

    def __init__(self, secret: str) -> None:
        self._key = hashlib.sha256(b"streamrelay read token\x00" + secret.encode()).digest()

    def __repr__(self) -> str:
        return "ReadTokens()"

    def token(self, run: str) -> str:
        """The read token of ``run``: 32 hex characters."""
        return hmac.new(self._key, run.encode(), hashlib.sha256).hexdigest()[:32]

    def allows(self, run: str, token: str | None) -> bool:
        """True when ``token`` is ``run``'s read token."""
        return token is not None and hmac.compare_digest(self.token(run).encode(), token.encode())
