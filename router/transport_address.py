"""A connection's two addresses, as uvicorn puts them in an ASGI scope, read from what
the transport saved when it was accepted."""

from __future__ import annotations

import asyncio


def local_address(transport: asyncio.BaseTransport) -> tuple[str, int | None] | None:
    """The scope's ``server``, as uvicorn's ``get_local_addr`` gives it, from the address
    the transport saved when it was accepted. uvicorn's helper asks for the transport's
    ``socket`` instead, for which uvloop builds a socket object and asks the kernel again
    (about 6 us a connection, docs/BENCHMARKS.md)."""
    info = transport.get_extra_info("sockname")
    if isinstance(info, str):  # a Unix socket's path
        return (info, None)
    return _host_port(info)


def peer_address(transport: asyncio.BaseTransport) -> tuple[str, int] | None:
    """The scope's ``client``, as uvicorn's ``get_remote_addr`` gives it, from the saved
    peer address (see :func:`local_address`); None for a Unix socket's peer."""
    return _host_port(transport.get_extra_info("peername"))


def _host_port(info: object) -> tuple[str, int] | None:
    if isinstance(info, tuple) and len(info) >= 2:  # IPv6 adds flow info and scope id
        return (str(info[0]), int(info[1]))
    return None
