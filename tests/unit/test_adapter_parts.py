"""The parts every platform adapter composes by name (adapters/adapter_parts.py): a repr of the named facts only,
``send_timeout_s`` on the connection, close, measure from the render cache."""

from __future__ import annotations

from dataclasses import dataclass

from streamrelay.adapters.adapter_parts import ConnectionTimeout, close_connection, measure_rendered, shows
from streamrelay.adapters.rendering import RenderCache
from streamrelay.core.ports import TextFormat


@dataclass
class _Conn:
    base_url: str
    token: str
    send_timeout_s: float = 10.0
    closed: int = 0

    async def close(self) -> None:
        self.closed += 1


@dataclass(frozen=True)
class _Rendered:
    body: str
    units: int


class _Adapter:
    __repr__ = __str__ = shows(base_url="_conn.base_url")
    send_timeout_s = ConnectionTimeout()
    close = close_connection
    measure = measure_rendered

    def __init__(self, conn: _Conn) -> None:
        self._conn = conn
        self.secret = conn.token
        self.render: RenderCache[_Rendered] = RenderCache(lambda text, fmt: _Rendered(text.upper(), len(text) * 2))


def test_the_repr_names_only_the_facts_given_never_a_token() -> None:
    adapter = _Adapter(_Conn("http://127.0.0.1:8081", "123:SECRET-token"))
    assert repr(adapter) == str(adapter) == "_Adapter(base_url='http://127.0.0.1:8081')"
    assert "SECRET" not in repr(adapter)


async def test_send_timeout_s_is_the_connections_and_close_and_measure_go_through_it() -> None:
    conn = _Conn("http://x", "t")
    adapter = _Adapter(conn)
    assert adapter.send_timeout_s == 10.0
    adapter.send_timeout_s = 0.5
    assert conn.send_timeout_s == 0.5 and adapter.send_timeout_s == 0.5
    assert isinstance(_Adapter.send_timeout_s, ConnectionTimeout)
    assert adapter.measure("abc", TextFormat.PLAIN) == 6 and len(adapter.render) == 1  # kept for the send
    await adapter.close()
    assert conn.closed == 1


def test_a_measured_text_is_rendered_once_for_its_send_and_not_kept_after_it() -> None:
    rendered: list[str] = []

    def render(text: str, fmt: TextFormat) -> _Rendered:
        rendered.append(text)
        return _Rendered(text.upper(), len(text) * 2)

    cache: RenderCache[_Rendered] = RenderCache(render)
    assert cache("abc", TextFormat.PLAIN).units == 6  # measured
    assert cache.take("abc", TextFormat.PLAIN).units == 6 and rendered == ["abc"]  # sent: the measure's rendering
    assert len(cache) == 0  # not kept once its call has it
    assert cache.take("abc", TextFormat.PLAIN).units == 6 and rendered == ["abc", "abc"]  # a retry renders it again
    assert len(cache) == 0
