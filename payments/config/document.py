"""Reading an ``svc.config.v1`` document: its JSON Schema, the secret guard, and the rules
a schema cannot say (unique product slugs and skus). Every error names its JSON path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import parse_qsl

from jsonschema import Draft202012Validator

from payments.errors import ApiError
from payments.schemas import CONFIG, load_schema, validator

MODES = ("merge", "mirror")
MAX_ERRORS = 50

# Values no config may hold (spec 2.9): our own secrets by prefix, a raw private key, a
# PEM private key, a bearer credential.
_RAW_KEY = re.compile(r"\b(?:0x)?[0-9a-fA-F]{64}\b")
_PEM_KEY = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")
_SECRET_VALUES = (
    ("api_key", re.compile(r"\bzpk_[0-9A-Za-z]"), "a zpk_ API key"),
    ("webhook_secret", re.compile(r"\bzwhsec_[0-9A-Za-z]"), "a zwhsec_ webhook signing secret"),
    ("cli_token", re.compile(r"\bzcli_[0-9A-Za-z]"), "a zcli_ CLI grant token"),
    ("private_key", _RAW_KEY, "a private key (64 hex digits)"),
    ("private_key", _PEM_KEY, "a PEM private key"),
    ("token", re.compile(r"\bBearer\s+\S{8,}", re.IGNORECASE), "a bearer token"),
)
# Where a secret found in free text ends: the next space or quote (a PEM key: its END line).
_RUN = re.compile(r"[^\s\"'<>`]*")
_PEM_END = re.compile(r"-----END [A-Z ]*PRIVATE KEY-----")
_ANY_SECRET_VALUE = re.compile("|".join(
    f"(?{'i' if pattern.flags & re.IGNORECASE else ''}:{pattern.pattern})"
    for _, pattern, _ in _SECRET_VALUES))
# Object keys whose non-empty string value is a credential, wherever they appear.
# The word must start the key, follow a ``_``/``-``, or start a camelCase word
# (``dbPassword``), so that ``passthrough`` or ``maxTokens`` stay allowed.
_SECRET_KEYS = re.compile(
    r"(?:^|[_-]|(?<=[a-z0-9])(?=[A-Z]))"
    r"(?i:pass(?:word|wd|phrase)?|secret|token|api[_-]?key|private[_-]?key|"
    r"credentials?|mnemonic|seed[_-]?phrase)\s*\Z")  # "password\n" is still a password
# What a revision shows in place of a value that looks like a secret (an op's before value
# set outside config), or of a credential a URL carried (migration 0018 withheld those of
# revisions recorded before the guard refused them).
WITHHELD = "[withheld: looks like a secret]"
# A URL anywhere in a string, up to whitespace or a quote: config revisions would keep a
# credential riding in one (a password in its user part, a signed or secret parameter).
# WITHHELD standing in for one is read as part of the URL, spaces and all.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?:" + re.escape(WITHHELD)
                  + r"|[^\s\"'<>`])+")
# Query or fragment parameters that carry a credential, besides those named like one
# (_SECRET_KEYS: token, access_token, api_key, X-Amz-Security-Token, ...): signatures of
# signed URLs (sig, signature, X-Amz-Signature, X-Goog-Signature), and key= and auth=.
_SECRET_PARAMS = re.compile(r"(?i:(?:[A-Za-z0-9._-]*[_-])?sig(?:nature)?|key|auth)")
_PLAIN_PARAM = re.compile(r"[A-Za-z0-9_.-]{1,40}")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a document, at ``path`` (``$.products[2].priceAtomic``)."""

    path: str
    code: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "code": self.code, "message": self.message}


def json_path(parts: Iterator[str | int] | list[str | int]) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (
            f".{part}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part) else f"[{part!r}]")
    return out


@cache
def _validator() -> Draft202012Validator:
    return validator(load_schema(CONFIG))


def schema_problems(document: Any) -> list[Problem]:
    problems = []
    for error in sorted(_validator().iter_errors(document), key=lambda e: list(e.path)):
        problems.append(Problem(json_path(list(error.absolute_path)), "config_invalid",
                                error.message))
        if len(problems) >= MAX_ERRORS:
            break
    return problems


def secret_problems(document: Any) -> list[Problem]:
    """Every value in ``document`` that looks like a secret; the message never repeats it."""
    found: list[Problem] = []

    def walk(value: Any, path: list[str | int]) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and (what := secret_in(key)) is not None:
                    # Named by the object that holds it: the key's own path would repeat it.
                    found.append(_problem(path, f"A key of this object looks like {what}"))
                    continue
                if _names_credential(key, item):
                    found.append(_problem([*path, key], f"'{key}' holds a credential"))
                    continue
                walk(item, [*path, str(key)])
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, [*path, index])
        elif isinstance(value, str) and (what := secret_in(value)) is not None:
            found.append(_problem(path, f"This looks like {what}"))
    walk(document, [])
    return found[:MAX_ERRORS]


def refuse_secrets(value: Any, what: str = "The config") -> None:
    """422 ``config_contains_secret`` listing each path, when ``value`` (a config document,
    or a product as the product API takes it: its fields are config fields) holds one."""
    problems = secret_problems(value)
    if problems:
        raise ApiError("config_contains_secret", 422, f"{what} holds secrets; remove them "
                       f"({len(problems)} found). Nothing was changed.",
                       errors=[p.as_dict() for p in problems])


def withhold_secrets(value: Any) -> Any:
    """``value`` with each string that looks like a secret (:func:`looks_like_secret`, or
    under a key named like a credential) replaced by :data:`WITHHELD`, whole (an object with
    a key that looks like one, whole): what a plan's diff may show and a revision record of
    values set outside config (the product, app and webhook APIs), and what migration 0021
    made of the values revisions recorded before. The mark itself is no secret: a string
    holding it (a URL whose credential migration 0018 withheld) is kept as it is, so a
    second pass changes nothing."""
    if isinstance(value, dict):
        if any(isinstance(key, str) and looks_like_secret(key) is not None for key in value):
            return WITHHELD
        return {key: WITHHELD if _names_credential(key, item) else withhold_secrets(item)
                for key, item in value.items()}
    if isinstance(value, list):
        return [withhold_secrets(item) for item in value]
    if isinstance(value, str) and looks_like_secret(value) is not None:
        return WITHHELD
    return value


def _names_credential(key: Any, item: Any) -> bool:
    return (isinstance(key, str) and _SECRET_KEYS.search(key) is not None
            and isinstance(item, str) and bool(item.strip()))


def _problem(path: list[str | int], what: str) -> Problem:
    return Problem(json_path(path), "config_contains_secret",
                   f"{what}; secrets never go in a config file (spec 2.9). Keep it in your "
                   "deployment's environment instead.")


def secret_in(text: str) -> str | None:
    """What the guard refuses ``text`` for (never the secret itself), or None: a secret it
    looks like it holds (:func:`looks_like_secret`), or WITHHELD, which stands for a value
    that is gone: applying it would write the mark where that value was."""
    if (what := looks_like_secret(text)) is not None:
        return what
    if WITHHELD in text:
        return f"the mark of a withheld secret ('{WITHHELD}'), not the value it stood for"
    return None


def looks_like_secret(text: str) -> str | None:
    """What secret ``text`` looks like it holds (never the secret itself), or None: the
    guard's rule for a value, whatever key holds it (our prefixed secrets, a raw or PEM
    private key, a bearer token, a URL carrying a credential)."""
    if _ANY_SECRET_VALUE.search(text):  # one pass for the common case: nothing
        for _, pattern, what in _SECRET_VALUES:
            if pattern.search(text):
                return what
    return url_credential_in(text)


def url_credential_in(text: str) -> str | None:
    """The credential a URL in ``text`` carries, described, or None (one withheld is none)."""
    if "://" in text:
        for url in _URL.findall(text):
            if (carried := url_credential(url)) is not None:
                return carried
    return None


def mask_secrets(text: str, mask: str = WITHHELD) -> str:
    """``text`` (free text: a log line) with each secret the guard recognizes replaced by
    ``mask``, whole: our prefixed secrets, PEM private keys, bearer tokens, URLs carrying a
    credential. Bare 64-hex-digit values are left alone: in a log line they are transaction
    hashes and charge ids far more often than keys, and a caller that holds a key masks it
    by its value (router/log_mask.py)."""
    for _, pattern, _ in _SECRET_VALUES:
        if pattern is not _RAW_KEY and pattern.search(text):
            text = _mask_each(pattern, text, mask)
    if "://" in text:
        text = _URL.sub(lambda m: mask if url_credential(m.group(0)) else m.group(0), text)
    return text


def _mask_each(pattern: re.Pattern[str], text: str, mask: str) -> str:
    out, at = [], 0
    for found in pattern.finditer(text):
        if found.start() < at:  # inside a secret already masked
            continue
        if pattern is _PEM_KEY:
            end = _PEM_END.search(text, found.end())
            stop = end.end() if end else len(text)
        else:
            run = _RUN.match(text, found.end())
            stop = run.end() if run else found.end()
        out += [text[at:found.start()], mask]
        at = stop
    return "".join([*out, text[at:]])


def url_credential(url: str) -> str | None:
    """The credential ``scheme://...`` carries, described, or None: a password in its user
    part, or a non-empty signature, token or key among its query or fragment parameters
    (OAuth's implicit flow puts ``access_token`` in the fragment)."""
    _, authority, tail = _url_parts(url)
    if _userinfo_credential(authority) is not None:
        return "a URL with a password in it (user:password@host)"
    _, _, query, _, fragment = _url_tail(tail)
    for piece in [*query.split("&"), *fragment.split("&")]:
        if (name := _secret_parameter(piece)) is not None:
            named = f"its '{name}' parameter" if _PLAIN_PARAM.fullmatch(name) else "a parameter"
            return f"a signed or secret URL (a credential in {named})"
    return None


def withhold_url_credentials(value: Any) -> Any:
    """``value`` (JSON: a string, or any object keys and strings within) with the credential
    each URL in it carries, by :func:`url_credential`'s rule, replaced by WITHHELD: a user
    part holding a password (the whole user part), the value of each secret parameter.
    Everything else is kept character for character, and what holds none is returned as it
    is; WITHHELD is no credential, so a second pass changes nothing. Two object keys that
    come out the same are one key after it (the later's value), as JSON objects go."""
    if isinstance(value, dict):
        return {withhold_url_credentials(key): withhold_url_credentials(item)
                for key, item in value.items()}
    if isinstance(value, list):
        return [withhold_url_credentials(item) for item in value]
    if isinstance(value, str) and "://" in value:
        return _URL.sub(lambda found: _withheld_url(found.group()), value)
    return value


def _withheld_url(url: str) -> str:
    head, authority, tail = _url_parts(url)
    if (userinfo := _userinfo_credential(authority)) is not None:
        authority = WITHHELD + authority[len(userinfo):]
    path, question, query, hash_, fragment = _url_tail(tail)
    return (head + authority + path + question + _withheld_parameters(query) + hash_
            + _withheld_parameters(fragment))


def _withheld_parameters(part: str) -> str:
    return "&".join(piece if _secret_parameter(piece) is None
                    else f"{piece.partition('=')[0]}={WITHHELD}" for piece in part.split("&"))


def _url_parts(url: str) -> tuple[str, str, str]:
    """``scheme://``, the authority (``user:password@host:port``) and what follows it."""
    scheme, separator, rest = url.partition("://")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    return scheme + separator, authority, rest[len(authority):]


def _url_tail(tail: str) -> tuple[str, str, str, str, str]:
    """A URL's path, ``?``, query, ``#`` and fragment (the separators empty when absent)."""
    before_fragment, hash_, fragment = tail.partition("#")
    path, question, query = before_fragment.partition("?")
    return path, question, query, hash_, fragment


def _userinfo_credential(authority: str) -> str | None:
    """The authority's user part when it holds a password (a user name alone is fine)."""
    userinfo, at, _ = authority.rpartition("@")
    if at and userinfo != WITHHELD and userinfo.partition(":")[2]:
        return userinfo
    return None


def _secret_parameter(piece: str) -> str | None:
    """The name of the query or fragment parameter ``piece`` (``name=value``, as
    ``parse_qsl`` reads it: ``p%61ssword`` is ``password``) when its value is a credential:
    non-empty, not WITHHELD, under a signature's or a secret's name."""
    for name, value in parse_qsl(piece, keep_blank_values=True):
        if (value.strip() and value != WITHHELD
                and (_SECRET_PARAMS.fullmatch(name) or _SECRET_KEYS.search(name))):
            return name
    return None


def withheld_paths(value: Any, path: tuple[str | int, ...] = ()) -> list[str]:
    """The JSON path of each string in ``value`` holding WITHHELD (an object's, for a key)."""
    if isinstance(value, dict):
        here = [json_path(list(path))] if any(
            isinstance(key, str) and WITHHELD in key for key in value) else []
        return here + [found for key, item in value.items()
                       for found in withheld_paths(item, (*path, str(key)))]
    if isinstance(value, list):
        return [found for index, item in enumerate(value)
                for found in withheld_paths(item, (*path, index))]
    return [json_path(list(path))] if isinstance(value, str) and WITHHELD in value else []


def rule_problems(document: dict[str, Any]) -> list[Problem]:
    """What the schema cannot say: product slugs and skus are unique in a file."""
    problems = []
    seen: dict[tuple[str, str], int] = {}
    for index, product in enumerate(document.get("products") or []):
        for field in ("slug", "sku"):
            value = product.get(field) if field == "slug" else product.get("sku", product["slug"])
            first = seen.setdefault((field, value), index)
            if first != index:
                problems.append(Problem(json_path(["products", index, field]),
                                        "config_duplicate",
                                        f"{field} '{value}' is also declared at "
                                        f"{json_path(['products', first])}."))
                break  # a repeated slug usually repeats the sku it defaults to: say it once
    return problems


def check_document(document: Any) -> dict[str, Any]:
    """The document, or the 422 ``config_invalid`` / ``config_contains_secret`` error that
    lists every problem by JSON path. Secrets are looked for first, and in any shape."""
    refuse_secrets(document)
    problems = schema_problems(document)
    if not problems:
        assert isinstance(document, dict)
        problems = rule_problems(document)
    if problems:
        raise ApiError("config_invalid", 422, f"The config does not follow svc.config.v1 "
                       f"({len(problems)} problem{'s' if len(problems) > 1 else ''}; first: "
                       f"{problems[0].path}: {problems[0].message}).",
                       errors=[p.as_dict() for p in problems])
    assert isinstance(document, dict)
    return document


def check_mode(value: Any) -> str:
    if value is None:
        return "merge"
    if value not in MODES:
        raise ApiError("invalid_field", 422, "'mode' must be merge or mirror.", field="mode")
    assert isinstance(value, str)
    return value
