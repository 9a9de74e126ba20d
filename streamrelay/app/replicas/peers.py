"""The other replicas, as one replica asks them for ``GET /v1/runs?all=1``: the operator sees every run from any
replica.

The live replicas are those whose heartbeat has not lapsed (:meth:`adapters.redis.ReplicaUrls.live`, by Redis's
clock); every one but this replica is asked ``GET /v1/runs`` (its own runs only: never ``all``, so nobody asks
around twice) at the URL it announced, with the caller's ``Authorization``, all at once. A replica that does not
answer within ``timeout_s`` (dead, paused, or refusing the token) is left out and named in ``unreachable``; so is
Redis itself when the replica list cannot be read.
"""

from __future__ import annotations

import asyncio

import httpx
from pydantic import ValidationError
from redis.exceptions import RedisError

from streamrelay.adapters.redis import ReplicaUrls
from streamrelay.core.contracts.answers import RunListing, RunRow, Unreachable

ASK_TIMEOUT_S = 3.0
"""How long one replica may take to answer (seconds): the operator page refreshes every 2 s."""


class ReplicaPeers:
    """The replicas other than ``me``, asked for their runs.

    Args:
        urls: the replicas' heartbeats and URLs.
        me: this replica's id (never asked: its runs are read in-process).
        timeout_s: how long one replica may take to answer.
    """

    def __init__(self, urls: ReplicaUrls, me: str, *, timeout_s: float = ASK_TIMEOUT_S) -> None:
        self._urls = urls
        self.me = me
        self._timeout_s = timeout_s

    def __repr__(self) -> str:
        return f"ReplicaPeers(me={self.me!r})"

    async def runs(self, bearer: str) -> tuple[list[RunRow], list[Unreachable]]:
        """Every other live replica's active runs (as ``GET /v1/runs`` lists them, with ``watch``), each row with its
        ``replica``; and what could not be asked (``replica`` and ``url`` empty when Redis could not be read)."""
        try:
            live = await self._urls.live()
        except (RedisError, OSError) as exc:  # the error's name only: the URL may hold a password
            return [], [Unreachable(replica="", url="", error=f"Redis unreachable ({type(exc).__name__})")]
        live.pop(self.me, None)
        async with httpx.AsyncClient(timeout=self._timeout_s, follow_redirects=False) as http:
            answers = await asyncio.gather(*(self._ask(http, live[owner], bearer) for owner in sorted(live)))
        rows: list[RunRow] = []
        unreachable: list[Unreachable] = []
        for owner, found in zip(sorted(live), answers, strict=True):
            if isinstance(found, str):
                unreachable.append(Unreachable(replica=owner, url=live[owner], error=found))
            else:
                rows += [row.model_copy(update={"replica": row.replica or owner}) for row in found]
        return rows, unreachable

    @staticmethod
    async def _ask(http: httpx.AsyncClient, url: str, bearer: str) -> list[RunRow] | str:
        """The rows of the replica at ``url``, or why they could not be had (one line)."""
        try:
            answer = await http.get(url.rstrip("/") + "/v1/runs", headers={"Authorization": bearer})
        except httpx.HTTPError as exc:
            return f"no answer ({type(exc).__name__})"
        if answer.status_code != 200:
            return f"answered {answer.status_code}"
        try:
            return RunListing.model_validate_json(answer.content).runs
        except ValidationError:
            return "answered something other than a run list"
