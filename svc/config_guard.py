"""Values a config file must never hold (spec 2.9), found before anything is sent or written.

The service refuses them too (``config_contains_secret``); looking first on this side means
a secret typed into ``svc.config.json`` never crosses the network, and ``svc config init``
never writes one. The rules are the service's (``payments.config.document``), repeated here
because the CLI imports no server code; tests/svc/test_config_guard.py holds the two to the
same answers.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl

# Our own secrets by prefix, a raw private key, a PEM private key, a bearer credential.
_SECRET_VALUES = (
    (re.compile(r"\bzpk_[0-9A-Za-z]"), "a zpk_ API key"),
    (re.compile(r"\bzwhsec_[0-9A-Za-z]"), "a zwhsec_ webhook signing secret"),
    (re.compile(r"\bzcli_[0-9A-Za-z]"), "a zcli_ CLI grant token"),
    (re.compile(r"\b(?:0x)?[0-9a-fA-F]{64}\b"), "a private key (64 hex digits)"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a PEM private key"),
    (re.compile(r"\bBearer\s+\S{8,}", re.IGNORECASE), "a bearer token"),
)
# Keys whose non-empty string value is a credential: the word starts the key, follows a
# ``_``/``-`` or starts a camelCase word (``dbPassword``), so ``passthrough`` stays allowed.
_SECRET_KEYS = re.compile(
    r"(?:^|[_-]|(?<=[a-z0-9])(?=[A-Z]))"
    r"(?i:pass(?:word|wd|phrase)?|secret|token|api[_-]?key|private[_-]?key|"
    r"credentials?|mnemonic|seed[_-]?phrase)\s*\Z")  # "password\n" is still a password
# A URL anywhere in a string, and the query or fragment parameters that carry a credential
# besides those named like one: signed-URL signatures, key= and auth=.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`]+")
_SECRET_PARAMS = re.compile(r"(?i:(?:[A-Za-z0-9._-]*[_-])?sig(?:nature)?|key|auth)")
_PLAIN_PARAM = re.compile(r"[A-Za-z0-9_.-]{1,40}")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What the service shows in place of a secret (a revision's withheld credentials): it stands
# for a value that is not there, and applying it would write the mark where that value was.
WITHHELD = "[withheld: looks like a secret]"


def json_path(parts: list[str | int]) -> str:
    """``["products", 0, "name"]`` -> ``$.products[0].name``, as the service writes paths."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if _PLAIN_KEY.fullmatch(part) else f"[{part!r}]"
    return out


def secret_problems(document: Any) -> list[dict[str, str]]:
    """Each place in ``document`` that holds a secret, as ``{path, code, message}``; the
    message says what it looks like and never repeats the value."""
    found: list[dict[str, str]] = []
    _walk(document, [], found)
    return found


def _walk(value: Any, path: list[str | int], found: list[dict[str, str]]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and (what := _secret_in(key)) is not None:
                # Named by the object that holds it: the key's own path would repeat it.
                found.append(_problem(path, f"a key of this object looks like {what}"))
            elif (isinstance(key, str) and _SECRET_KEYS.search(key)
                    and isinstance(item, str) and item.strip()):
                found.append(_problem([*path, key], f"'{key}' holds a credential"))
            else:
                _walk(item, [*path, str(key)], found)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _walk(item, [*path, index], found)
    elif isinstance(value, str) and (what := _secret_in(value)) is not None:
        found.append(_problem(path, f"this looks like {what}"))


def _secret_in(text: str) -> str | None:
    what = next((what for pattern, what in _SECRET_VALUES if pattern.search(text)), None)
    if what is not None:
        return what
    if WITHHELD in text:  # before URLs: the service reads the mark as no credential
        return f"the mark of a withheld secret ('{WITHHELD}'), not the value it stood for"
    return next((w for url in _URL.findall(text) if (w := _url_credential(url))), None)


def _url_credential(url: str) -> str | None:
    """A password in the URL's user part, or a non-empty signature, token or key among its
    query or fragment parameters."""
    rest = url.partition("://")[2]
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    userinfo, at, _ = authority.rpartition("@")
    if at and userinfo.partition(":")[2]:
        return "a URL with a password in it (user:password@host)"
    before_fragment, _, fragment = rest[len(authority):].partition("#")
    for part in (before_fragment.partition("?")[2], fragment):
        for name, value in parse_qsl(part, keep_blank_values=True):
            if value.strip() and (_SECRET_PARAMS.fullmatch(name) or _SECRET_KEYS.search(name)):
                named = f"its '{name}' parameter" if _PLAIN_PARAM.fullmatch(name) else "a parameter"
                return f"a signed or secret URL (a credential in {named})"
    return None


def _problem(path: list[str | int], what: str) -> dict[str, str]:
    return {"path": json_path(path), "code": "config_contains_secret",
            "message": f"{what}; secrets never go in a config file. Keep it in your "
                       "deployment's environment instead."}
