"""``svc-ops``'s log lines: on stderr, one line a record, in svc-server's format.

WARNING and up by default: a command's answer is its stdout, and its own notes go to stderr
as they always did; ``svc-ops --verbose`` adds INFO (what an owner transaction sends, and
whatever the libraries say at that level, alembic's migration steps among them).

No secret reaches a line: every record passes svc-server's :class:`SecretMask`
(router/log_mask.py), which masks the values of the settings that hold one and whatever the
config secret guard takes for one; here also the owner key once read (:func:`withhold`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from router.log_lines import LOG_FORMAT
from router.log_mask import SecretMask, mask_of
from router.settings import Settings

_active: list[SecretMask] = []


@contextmanager
def stderr_logging(settings: Settings, *, verbose: bool = False) -> Iterator[SecretMask]:
    """The handler for one command's run, taken away again after it: ``main`` also runs
    in-process (tests), where a handler left behind would write to a stream long gone."""
    secrets = mask_of(settings)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(secrets)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    _active.append(secrets)
    try:
        yield secrets
    finally:
        _active.remove(secrets)
        root.removeHandler(handler)
        root.setLevel(level)


def withhold(value: str) -> None:
    """Mask ``value`` in every line from now on (a key the command read)."""
    for secrets in _active:
        secrets.add(value)
