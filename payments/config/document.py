"""Reading an ``svc.config.v1`` document: its JSON Schema, the secret guard, and the rules
a schema cannot say (unique product slugs and skus). Every error names its JSON path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator

from payments.errors import ApiError
from payments.schemas import CONFIG, load_schema, validator

MODES = ("merge", "mirror")
MAX_ERRORS = 50

# Values no config may hold (spec 2.9): our own secrets by prefix, a raw private key, a
# PEM private key, a bearer credential.
_SECRET_VALUES = (
    ("api_key", re.compile(r"\bzpk_[0-9A-Za-z]"), "a zpk_ API key"),
    ("webhook_secret", re.compile(r"\bzwhsec_[0-9A-Za-z]"), "a zwhsec_ webhook signing secret"),
    ("cli_token", re.compile(r"\bzcli_[0-9A-Za-z]"), "a zcli_ CLI grant token"),
    ("private_key", re.compile(r"\b(?:0x)?[0-9a-fA-F]{64}\b"), "a private key (64 hex digits)"),
    ("private_key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a PEM private key"),
    ("token", re.compile(r"\bBearer\s+\S{8,}", re.IGNORECASE), "a bearer token"),
)
# Object keys whose non-empty string value is a credential, wherever they appear.
# The word must start the key, follow a ``_``/``-``, or start a camelCase word
# (``dbPassword``), so that ``passthrough`` or ``maxTokens`` stay allowed.
_SECRET_KEYS = re.compile(
    r"(?:^|[_-]|(?<=[a-z0-9])(?=[A-Z]))"
    r"(?i:pass(?:word|wd|phrase)?|secret|token|api[_-]?key|private[_-]?key|"
    r"credentials?|mnemonic|seed[_-]?phrase)\s*\Z")  # "password\n" is still a password


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
                if (isinstance(key, str) and _SECRET_KEYS.search(key)
                        and isinstance(item, str) and item.strip()):
                    found.append(Problem(json_path([*path, key]), "config_contains_secret",
                                         f"'{key}' holds a credential; secrets never go in a "
                                         "config file. Keep it in your deployment's "
                                         "environment instead."))
                    continue
                walk(item, [*path, str(key)])
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, [*path, index])
        elif isinstance(value, str):
            for _, pattern, what in _SECRET_VALUES:
                if pattern.search(value):
                    found.append(Problem(json_path(path), "config_contains_secret",
                                         f"This looks like {what}; secrets never go in a config "
                                         "file (spec 2.9). Keep it in your deployment's "
                                         "environment instead."))
                    break
    walk(document, [])
    return found[:MAX_ERRORS]


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
    problems = secret_problems(document)
    if problems:
        raise ApiError("config_contains_secret", 422, "The config holds secrets; remove "
                       f"them ({len(problems)} found). Nothing was changed.",
                       errors=[p.as_dict() for p in problems])
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
