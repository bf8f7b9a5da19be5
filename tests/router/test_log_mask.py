"""The mask every log line passes (router/log_mask.py), on what libraries hand it: a message
whose arguments do not fit, and uvicorn's second copy of its message for colours."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
from uvicorn.logging import DefaultFormatter

from router.log_mask import MASK, SecretMask

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
