"""``svc-ops``'s log lines: on stderr, one line a record, in svc-server's format.

WARNING and up by default: a command's answer is its stdout, and its own notes go to stderr
as they always did; ``svc-ops --verbose`` adds INFO (what an owner transaction sends, and
whatever the libraries say at that level, alembic's migration steps among them).

No secret reaches a line: every record passes :class:`SecretMask`, which masks the values
of the settings that hold one (router/secret_files.py names them), the owner key once read
(:func:`withhold`), and whatever the config secret guard takes for one
(``payments.config.document.mask_secrets``). Messages are written so as not to hold any in
the first place; this is what catches a library's message or a traceback.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from payments.config.document import mask_secrets
from router.log_lines import LOG_FORMAT
from router.secret_files import FROM_FILES
from router.settings import Settings

MASK = "[withheld]"
# Shorter values are not looked for: masking every "pw" of every line would hide more than
# it protects.
_SHORTEST = 4
_HEX = re.compile(r"[0-9a-fA-F]+")
_active: list[SecretMask] = []


class SecretMask(logging.Filter):
    """Masks known secret values (any case: hex keys are written both ways) and what the
    config secret guard recognizes, in a record's message and its traceback."""

    def __init__(self) -> None:
        super().__init__()
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def add(self, value: str | None) -> None:
        if not value or len(value.strip()) < _SHORTEST:
            return
        value = value.strip()
        digits = value.removeprefix("0x")
        # A hex key is written with and without 0x: mask the 0x with it, whichever was given.
        self._values |= {value, digits, "0x" + digits} if _HEX.fullmatch(digits) else {value}
        longest_first = sorted(self._values, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, longest_first)), re.IGNORECASE)

    def mask(self, text: str) -> str:
        if self._pattern is not None:
            text = self._pattern.sub(MASK, text)
        return mask_secrets(text, MASK)

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = self.mask(record.getMessage()), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.mask(record.exc_text)
        if record.stack_info:
            record.stack_info = self.mask(record.stack_info)
        return True


def settings_secrets(settings: Settings) -> list[str]:
    """The secret values ``settings`` hold: each setting router/secret_files.py reads from
    a file (a key, a password, a URL that often carries one), the password of each URL,
    and the node URL's path and query (node providers put their API key there)."""
    found: list[str] = []
    for name in FROM_FILES:
        value = getattr(settings, name, None)
        if isinstance(value, str) and value:
            found += [value, urlsplit(value).password or ""] if "://" in value else [value]
    if settings.chain_rpc_url:
        node = urlsplit(settings.chain_rpc_url)
        found.append(node.path + (f"?{node.query}" if node.query else "")
                     if node.path.strip("/") or node.query else "")
    return found


@contextmanager
def stderr_logging(settings: Settings, *, verbose: bool = False) -> Iterator[SecretMask]:
    """The handler for one command's run, taken away again after it: ``main`` also runs
    in-process (tests), where a handler left behind would write to a stream long gone."""
    secrets = SecretMask()
    for value in settings_secrets(settings):
        secrets.add(value)
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
