"""Checks the CLI makes before it starts something, so that a person gets one line saying what to do instead of a
server's traceback: the files and option values it was given, the ports ``serve`` will listen on."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import typer

PORT_HINT = "pass --port (or set [service] port / STREAMRELAY_SERVICE__PORT)"


def existing_file(path: Path | None) -> Path | None:
    """A typer callback: ``path`` when it is a file (or None).

    Raises:
        typer.BadParameter: no such file (the message names the path).
    """
    if path is not None and not path.is_file():
        what = "a folder, not a file" if path.is_dir() else "no such file"
        raise typer.BadParameter(f"{what}: {path}")
    return path


def listen_problem(host: str, port: int, port_hint: str = PORT_HINT) -> str | None:
    """Why a server could not listen on ``host:port``, as one line saying what to do (``port_hint``: how to pick
    another port); None when it can (port 0:
    any free port, always fine). Binds and closes a socket the way the server will (``SO_REUSEADDR``), so a port
    another process listens on is found, and one left in TIME_WAIT is not taken for used."""
    if port == 0:
        return None
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"cannot listen on {where}: {host!r} is not an address of this machine ({exc.strerror}): pass --host"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (
                    f"cannot listen on {where}: the port is in use (a streamrelay started before? stop that "
                    f"process), or {port_hint}"
                )
            if exc.errno == errno.EADDRNOTAVAIL:
                return f"cannot listen on {where}: {host} is not an address of this machine: pass --host"
            if exc.errno == errno.EACCES:
                return f"cannot listen on {where}: not allowed (ports below 1024 need privileges): {port_hint}"
            return f"cannot listen on {where}: {exc.strerror}: pass --host and --port"
    return None


def check_listeners(config: Path, host: str | None, port: int | None) -> None:
    """Refuse to start ``serve`` when a port it would listen on (ingest, and ``ops_port`` when set) is taken.

    Settings that do not load are left to ``serve`` to report.

    Raises:
        typer.Exit: 1, after one line on stderr naming ``host:port`` and what to do.
    """
    from streamrelay.config.settings import load_settings
    from streamrelay.core.errors import ConfigError

    try:
        service = load_settings(config).service
    except ConfigError:
        return
    refuse_taken(host or service.host, service.port if port is None else port)
    if service.ops_port is not None:
        refuse_taken(service.ops_host, service.ops_port, "set [service] ops_port / STREAMRELAY_SERVICE__OPS_PORT")


def refuse_taken(host: str, port: int, port_hint: str = PORT_HINT) -> None:
    """Exit with one line when ``host:port`` cannot be listened on (:func:`listen_problem`).

    Raises:
        typer.Exit: 1, after the line on stderr.
    """
    from rich.markup import escape

    from streamrelay.app.cli_run import err

    problem = listen_problem(host, port, port_hint)
    if problem is not None:
        err.print(f"[red]error:[/] {escape(problem)}", highlight=False)
        raise typer.Exit(1)
