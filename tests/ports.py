"""Ports for the servers tests start, never shared between pytest-xdist workers.

A server a test starts in its own process (``streamrelay serve``, a mock, redis-server, a chaos campaign's) needs its
port before it runs. Binding port 0 and closing the probe hands out a port from Linux's ephemeral range, which every
outgoing connection of every worker also draws from: another worker (or this one's own client) may take it before
the server binds it. So the ports come from below that range (``app.chaos.procs.PORTS``, 20000-32767), and each worker
gets its own slice of it: ``gw0`` the first ``1/n``, ``gw1`` the next, ...; a serial run gets the whole range.
:func:`configure` puts the slice in ``STREAMRELAY_LISTEN_PORTS`` (tests/conftest.py calls it first), so the processes a
test starts (a chaos campaign picks its own ports) stay in it too. Within a process, :func:`free_port` goes round
its slice from a random start and hands a port out again only after the whole slice, and only if it binds then.

Servers a test runs inside its own process bind port 0 themselves and report the real port (``Sidecar.port``,
``MockTelegram.start()``): nothing to pick there.
"""

from __future__ import annotations

import os

from streamrelay.app.chaos.procs import PORTS, PORTS_ENV, free_port

__all__ = ["configure", "free_port", "worker_ports"]


def worker_ports(worker: str | None, count: int) -> range:
    """The slice of :data:`app.chaos.procs.PORTS` for pytest-xdist worker ``worker`` (``"gw3"``) of ``count``
    workers; the whole range for ``None`` (no xdist).

    Raises:
        ValueError: ``worker`` is not ``gw<N>`` with ``N < count``.
    """
    if worker is None:
        return PORTS
    index = int(worker.removeprefix("gw"))
    if not 0 <= index < count:
        raise ValueError(f"worker {worker!r} of {count}")
    size = len(PORTS) // count
    return range(PORTS.start + index * size, PORTS.start + (index + 1) * size)


def configure() -> range:
    """Set ``STREAMRELAY_LISTEN_PORTS`` to this worker's slice (from ``PYTEST_XDIST_WORKER`` and
    ``PYTEST_XDIST_WORKER_COUNT``, which xdist sets before conftests load); returns the slice."""
    ports = worker_ports(os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    os.environ[PORTS_ENV] = f"{ports.start}-{ports.stop - 1}"
    return ports
