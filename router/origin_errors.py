"""How an exchange with an origin fails (raised and stored by ``router/origin_connection.py``
and ``router/upstream_client.py``).

Plain Python classes, in a module of their own: those modules are compiled
(router/native.py), and a compiled class cannot inherit from two built-in exception
classes, as :class:`OriginTimeout` does.
"""

from __future__ import annotations


class OriginError(Exception):
    """The origin failed the exchange; subclasses say how."""


class OriginClosed(OriginError):
    """The connection closed before the answer was complete."""

    def __init__(self, answered: bool) -> None:
        super().__init__("origin closed the connection" +
                         (" mid-answer" if answered else " without answering"))
        self.answered = answered  # any byte of an answer had arrived


class OriginProtocolError(OriginError):
    """What the origin sent is not HTTP/1.x."""


class OriginTimeout(OriginError, TimeoutError):
    """Nothing arrived from the origin for the read timeout."""


class ClientGone(OriginError):
    """The downstream client left; the exchange was cut on purpose."""


class OriginUnreachable(OriginError):
    """No connection could be opened to any checked address of the origin."""


class OriginUnresolved(OriginError):
    """The origin's name has no address."""


class OriginConnectTimeout(OriginError, TimeoutError):
    """Resolving and connecting took longer than the connect timeout."""
