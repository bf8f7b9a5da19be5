"""The mask every log line of ``svc-server`` and ``svc-ops`` passes: no secret reaches one.

:class:`SecretMask` masks the values of the settings that hold a secret
(:func:`settings_secrets`; router/secret_files.py names them), whatever else a command adds
(``svc-ops``: the owner key once read), and whatever the config secret guard takes for one
(``payments.config.document.mask_secrets``). Messages are written so as not to hold any in
the first place; this is what catches a library's message or a traceback.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit

from payments.config.document import mask_secrets
from router.secret_files import FROM_FILES
from router.settings import Settings

MASK = "[withheld]"
# Shorter values are not looked for: masking every "pw" of every line would hide more than
# it protects.
_SHORTEST = 4
_HEX = re.compile(r"[0-9a-fA-F]+")


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
        try:
            message = record.getMessage()
        except Exception:
            # A caller's format error. Raised here it would reach the caller (filters run
            # outside the handler's error handling); logging's own report of it would print
            # the arguments unmasked.
            message = f"{record.msg} [arguments withheld: they did not fit the message]"
        record.msg, record.args = self.mask(message), None
        # uvicorn keeps a second copy of its message for colours, which its formatter writes
        # instead on a terminal, formatted from the (unmasked) args: dropped, the masked
        # message is what is written.
        record.__dict__.pop("color_message", None)
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


def mask_of(settings: Settings) -> SecretMask:
    """A mask of the secrets ``settings`` hold."""
    secrets = SecretMask()
    for value in settings_secrets(settings):
        secrets.add(value)
    return secrets
