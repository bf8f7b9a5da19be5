"""Where ``svc-server``'s log lines go: stderr, each through the process's
:class:`~router.log_mask.SecretMask`, in every process it runs.

Two handlers write them. The root logger's is ours (router/log_lines.py's format). The other
is uvicorn's: a ``uvicorn.Config`` applies a logging dictConfig of its own when it is made
(and again in each process of a multi-process serve, router/processes.py), which gives the
logger ``uvicorn`` a stderr handler and ``propagate=False``: what ``uvicorn``,
``uvicorn.error`` and ``uvicorn.asgi`` say never reaches the root's handler. So the config
handed to uvicorn (:func:`uvicorn_log_config`) is its own with the mask on that handler, in
its own format (uvicorn's lines read as uvicorn's documentation shows them). Its access
handler is left out: svc-server writes no access log (docs/decisions.md), and were one
turned on, its lines would reach the root's handler, masked, rather than a handler without
the mask.

The mask sits on handlers, not loggers: a filter on a logger does not see the records its
child loggers propagate to its handlers. Nothing of it runs per request: the proxy path logs
only its failures, and there is no access log.
"""

from __future__ import annotations

import copy
import logging
import sys
from typing import Any

from uvicorn.config import LOGGING_CONFIG

from router.log_lines import LOG_FORMAT
from router.log_mask import SecretMask, settings_secrets
from router.settings import Settings, load_settings

# One per process: uvicorn's dictConfig makes its filter anew at each Config, from a factory
# named by a string (process_mask), so it holds no settings of its own; this one does.
_MASK = SecretMask()


def process_mask() -> SecretMask:
    """The process's mask (named in :func:`uvicorn_log_config`)."""
    return _MASK


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's own logging config, its handler passing the process's mask."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {"secrets": {"()": f"{__name__}.{process_mask.__name__}"}}
    config["handlers"]["default"]["filters"] = ["secrets"]
    del config["handlers"]["access"], config["formatters"]["access"]
    del config["loggers"]["uvicorn.access"]
    return config


def configure_logging(settings: Settings) -> None:
    """The root's handler, and the settings' secrets in the process's mask; first thing in
    each process, before anything is said. Again is harmless: one handler, the same mask
    (a process serving in-process routers, as the tests do, calls it more than once)."""
    for value in settings_secrets(settings):
        _MASK.add(value)
    root = logging.getLogger()
    if not any(_MASK in handler.filters for handler in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        handler.addFilter(_MASK)
        root.addHandler(handler)
    root.setLevel(logging.INFO)
    # httpx writes every request's full URL at INFO (the SDK's calls in dev, webhook
    # deliveries, manifest fetches): an access log of our outgoing calls, whose query
    # strings can carry short-lived codes, as the one we do not write (docs/decisions.md).
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # A library's warning is a line too; Python would write it to stderr unmasked.
    logging.captureWarnings(True)


def configure_logging_from_environment() -> None:
    """:func:`configure_logging` with the ``SVCSRV_*`` settings: what each process of a
    multi-process serve runs first (the parent checked the same variables)."""
    configure_logging(load_settings())
