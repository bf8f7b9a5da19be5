"""The developer SDK and the ``svc`` CLI. Talks HTTP only; imports no server package."""

__version__ = "0.2.12"
