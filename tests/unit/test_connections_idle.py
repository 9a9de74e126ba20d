"""The connection guard makes room for a request with a valid token (issue 25, item 5): it evicts the idlest, oldest
connection that is not inside a request, of the same address past ``max_connections_per_peer`` and of any address
past ``max_connections``; never one inside a request."""

from __future__ import annotations

from streamrelay.adapters.ingest_http.connections import CloseReason, ConnectionGuard, ConnectionLimits
from streamrelay.adapters.ingest_http.protocols import authorization
from streamrelay.config.connections import ConnectionSettings


class FakeConnection:
    """An admitted connection with a fixed idle rank (None: inside a request)."""

    def __init__(self, name: str, rank: int | None) -> None:
        self.name, self.rank, self.evicted = name, rank, False

    def idle_rank(self) -> int | None:
        return None if self.evicted else self.rank

    def evict(self) -> None:
        self.evicted = True


def guard(**changes: int) -> ConnectionGuard:
    return ConnectionGuard(ConnectionLimits(**(ConnectionSettings().model_dump() | changes)))


def fill(g: ConnectionGuard, peer: str, *ranks: int | None) -> list[FakeConnection]:
    conns = []
    for n, rank in enumerate(ranks):
        assert g.admit(peer) is None
        conn = FakeConnection(f"{peer}#{n}", rank)
        g.track(peer, conn)
        conns.append(conn)
    return conns


async def test_the_idlest_then_oldest_connection_of_the_address_is_evicted_first() -> None:
    g = guard(max_connections_per_peer=5)
    conns = fill(g, "127.0.0.1", 2, 1, None, 0, 0)
    assert g.admit("127.0.0.1") is CloseReason.MAX_CONNECTIONS_PER_PEER
    evicted = []
    for _ in range(4):
        assert g.admit_vouched("127.0.0.1") is None
        evicted.append(next(c.name for c in conns if c.evicted and c.name not in evicted))
    # no byte yet (oldest first), then a head coming, then an idle keep-alive; never the busy one
    assert evicted == ["127.0.0.1#3", "127.0.0.1#4", "127.0.0.1#1", "127.0.0.1#0"]
    # the four admitted are not tracked here (the protocol tracks what it admits): only the busy one is left
    assert g.admit_vouched("127.0.0.1") is CloseReason.MAX_CONNECTIONS_PER_PEER
    assert not conns[2].evicted and g.count() == 5


async def test_past_the_total_cap_another_addresss_idle_connection_makes_room() -> None:
    g = guard(max_connections=3, max_connections_per_peer=3)
    others = fill(g, "10.0.0.9", 0, None, 0)
    assert g.admit_vouched("127.0.0.1") is None and others[0].evicted
    assert g.per_peer == {"10.0.0.9": 2, "127.0.0.1": 1}


async def test_nothing_idle_means_the_cap_still_refuses() -> None:
    g = guard(max_connections_per_peer=2)
    fill(g, "127.0.0.1", None, None)
    assert g.admit_vouched("127.0.0.1") is CloseReason.MAX_CONNECTIONS_PER_PEER
    assert g.count() == 2


def test_the_authorization_header_is_read_from_a_raw_head() -> None:
    head = b"POST /v1/runs/r/events HTTP/1.1\r\nHost: x\r\nauthorization:  Bearer abc \r\nContent-Length: 3"
    assert authorization(head) == "Bearer abc"
    assert authorization(b"GET / HTTP/1.1\r\nHost: x") is None
