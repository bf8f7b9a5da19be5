"""``svc-server`` (``router.cli.main``) whose libraries write the settings' secrets into log
lines: run as ``python -m tests.router.log_secrets serve`` (or ``dev --port N``) by
tests/router/test_server_logs.py, which reads what it writes.

The service's own messages are written to hold no secret, and no library was found to log
one by itself; a library's message or a traceback is what the mask is there for, so this
makes them: once the service has started (its lifespan opened its resources) in each
process that serves (the command's own with one process, each spawned one with several;
uvicorn has configured its logging there by then), it logs the settings' secrets through
uvicorn's logger (its own handler), SQLAlchemy's and aiohttp's (the root's), and the root,
in a message, in its arguments and in a traceback, and warns them in a Python warning, then
logs ``LEAKED`` through the root. With ``LOG_SECRETS_FAIL`` set, building the service fails
instead, with the secrets in the exception, which ends the command. The wraps are put in at
import as the command: multiprocessing's spawn imports this module (the command's
``__main__``, as ``__mp_main__``) in each process before the server's code runs there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import router.app
import router.cli
from router.resources import Resources
from router.settings import Settings

LEAKED = "library lines written"
_open_resources = router.app.open_resources


def secrets_of(settings: Settings) -> list[str]:
    """Each secret value the settings hold, the way a library would print it."""
    values = [settings.secret_key, settings.relayer_key, settings.smtp_password,
              settings.database_url, urlsplit(settings.database_url).password]
    if settings.chain_rpc_url:
        values.append(settings.chain_rpc_url)
    return [value for value in values if value]


def leak(settings: Settings) -> None:
    said = " ".join(secrets_of(settings))
    logging.getLogger("uvicorn.error").warning("uvicorn said %s", said)
    logging.getLogger("sqlalchemy.engine.Engine").warning("sqlalchemy said " + said)
    logging.getLogger("aiohttp.client").warning("aiohttp said %r", said)
    logging.getLogger().warning("root said %s", said)
    warnings.warn(f"library warned {said}", UserWarning, stacklevel=1)
    try:
        raise ConnectionError(f"cannot reach {said}")
    except ConnectionError:
        logging.getLogger("uvicorn.error").exception("uvicorn failed")
        logging.getLogger("sqlalchemy.pool").exception("sqlalchemy failed")
    logging.getLogger().warning(LEAKED)


@contextlib.asynccontextmanager
async def leaking_resources(settings: Settings, resources: Resources) -> AsyncIterator[Resources]:
    async with _open_resources(settings, resources) as opened:
        leak(settings)
        yield opened


def failing_create_app(settings: Settings) -> router.app.Service:
    raise ConnectionError(f"cannot reach {' '.join(secrets_of(settings))}")


# Only as the command (``__main__``) and in the processes it spawns (``__mp_main__``):
# imported by name (the test module reads LEAKED) it must leave the router as it is, or
# every server a later test starts in that process would leak and warn.
if __name__ in ("__main__", "__mp_main__"):
    router.app.open_resources = leaking_resources
    if os.environ.get("LOG_SECRETS_FAIL"):
        vars(router.cli)["create_app"] = failing_create_app  # the name router.cli calls

if __name__ == "__main__":
    sys.exit(router.cli.main())
