"""The one way a streamrelay process reaches the Redis of ``[service]``: ``serve`` (a replica) and the operator's
``streamrelay runs --dead`` / ``retry`` / ``drop`` both connect here, so a deployment that names its Redis through
Sentinel (``redis_sentinels`` + ``redis_sentinel_master``, ``redis_url`` holding only credentials) is reached by
both, and followed across a failover by both.
"""

from __future__ import annotations

from streamrelay.adapters.redis import Durability, connect, connect_sentinel, redacted
from streamrelay.adapters.redis.client import Redis
from streamrelay.config.settings import ServiceSettings


def redis_where(service: ServiceSettings) -> str:
    """Where ``service``'s Redis is, as it may be shown (no password): ``sentinel 'name' via h:p, ...`` or the
    redacted URL."""
    if service.redis_sentinels:
        return f"sentinel {service.redis_sentinel_master!r} via {', '.join(service.redis_sentinels)}"
    return redacted(service.redis_url.get_secret_value() if service.redis_url is not None else "")


def connect_service(
    service: ServiceSettings,
    *,
    client_name: str = "streamrelay",
    socket_timeout_s: float = 30.0,
    durability: Durability | None = None,
) -> Redis:
    """A client of ``service``'s Redis: the primary the sentinels name (``redis_sentinels``, followed across a
    failover), else ``redis_url``. Connected lazily at the first command; the caller closes it.

    Args:
        service: the ``[service]`` settings (``backend = "redis"``: validated to name a Redis one way or the other).
        client_name: the connection's name in ``CLIENT LIST``.
        socket_timeout_s: how long one reply may take (see :func:`adapters.redis.connect`).
        durability: how many replicas acknowledge a durable write (default: none waited for).

    Raises:
        ConfigError: the URL is not a Redis URL (shown redacted).
    """
    url = service.redis_url.get_secret_value() if service.redis_url is not None else ""
    if service.redis_sentinels:
        return connect_sentinel(
            service.sentinel_addresses(),
            service.redis_sentinel_master,
            url=url,
            client_name=client_name,
            socket_timeout_s=socket_timeout_s,
            durability=durability,
        )
    return connect(url, client_name=client_name, socket_timeout_s=socket_timeout_s, durability=durability)
