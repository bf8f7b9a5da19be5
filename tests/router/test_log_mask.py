"""The mask every log line passes (router/log_mask.py), on what libraries hand it: a message
whose arguments do not fit, and uvicorn's second copy of its message for colours."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from uvicorn.logging import DefaultFormatter

from router.log_mask import MASK, SecretMask
from router.server_logs import configure_logging
from router.settings import Settings

SECRET = "Hunter-2-Secret"


@pytest.fixture
def written() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    out = io.StringIO()
    mask = SecretMask()
    mask.add(SECRET)
    handler = logging.StreamHandler(out)
    handler.setFormatter(DefaultFormatter("%(levelprefix)s %(message)s", use_colors=True))
    handler.addFilter(mask)
    logger = logging.getLogger("tests.log_mask")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        yield logger, out
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
        logger.setLevel(logging.NOTSET)


def test_arguments_that_do_not_fit_are_withheld_not_raised(
        written: tuple[logging.Logger, io.StringIO]) -> None:
    """Raised in the filter, the error would reach the code that logged; logging's own
    report of it ("--- Logging error ---") prints the arguments as they are."""
    logger, out = written
    logger.warning("%d connections to %s", SECRET)
    line = out.getvalue()
    assert SECRET not in line
    assert "%d connections to %s [arguments withheld" in line


def test_uvicorns_colour_copy_of_a_message_is_not_written(
        written: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = written
    logger.info("running on %s", SECRET,
                extra={"color_message": "running on \x1b[1m%s\x1b[0m"})
    line = out.getvalue()
    assert SECRET not in line
    assert f"running on {MASK}" in line


def test_the_server_writes_no_line_per_outgoing_request(tmp_path: Path) -> None:
    """httpx says each request's full URL at INFO, query string and all: with the server's
    logging (INFO and up), an access log of its outgoing calls, which it does not write."""
    root, httpx_log = logging.getLogger(), logging.getLogger("httpx")
    handlers, level, httpx_level = list(root.handlers), root.level, httpx_log.level
    try:
        configure_logging(Settings(database_url=f"sqlite:///{tmp_path / 'svc.db'}"))
        assert root.isEnabledFor(logging.INFO)
        assert not httpx_log.isEnabledFor(logging.INFO)
        assert httpx_log.isEnabledFor(logging.WARNING)
    finally:
        for handler in set(root.handlers) - set(handlers):
            root.removeHandler(handler)
        root.setLevel(level)
        httpx_log.setLevel(httpx_level)
        logging.captureWarnings(False)
