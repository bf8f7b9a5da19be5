"""Published JSON Schemas (2020-12) served from the docs host (spec 1.1).

The files here carry no ``$id``: where a schema lives depends on the deployment's
``{docs_url}``, so :func:`published_schema` adds it when the docs host serves the file.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker, ValidationError, validators

WEBHOOK_EVENT = "webhook-event.schema.json"
CONFIG = "svc-config.v1.schema.json"
SCHEMA_FILES = (WEBHOOK_EVENT, CONFIG)
MEDIA_TYPE = "application/schema+json"

# RFC 3339 section 5.6 (what JSON Schema's "date-time" means); jsonschema checks the format
# only with an optional package installed, so we check it ourselves.
_DATE_TIME = re.compile(
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})\Z")


@cache
def _raw(name: str) -> str:
    if name not in SCHEMA_FILES:
        raise KeyError(name)
    return resources.files("payments.schemas").joinpath(name).read_text(encoding="utf-8")


def load_schema(name: str) -> dict[str, Any]:
    """A fresh copy of the packaged schema ``name``."""
    schema: dict[str, Any] = json.loads(_raw(name))
    return schema


def published_schema(name: str, docs_url: str) -> dict[str, Any]:
    """The schema as served: ``$schema``, then ``$id`` = ``{docs_url}/<name>``, then the rest."""
    schema = load_schema(name)
    head = {"$schema": schema.pop("$schema"), "$id": f"{docs_url.rstrip('/')}/{name}"}
    return {**head, **schema}


def is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True  # formats constrain strings only
    if not _DATE_TIME.match(value):
        return False
    try:
        datetime.fromisoformat(value.replace("z", "Z").replace("t", "T"))
    except ValueError:
        return False
    return True


def format_checker() -> FormatChecker:
    checker = FormatChecker()
    checker.checks("date-time")(is_date_time)
    return checker


@cache
def ecma_pattern(pattern: str) -> re.Pattern[str]:
    """``pattern`` as JSON Schema means it (ECMA-262, no flags), for Python's ``re``.

    ECMA-262's ``$`` matches only at the end of the text; Python's also just before a final
    ``\\n``, so ``"^[1-9][0-9]*$"`` would take ``"100\\n"``. Each ``$`` outside a character
    class becomes ``\\Z``. (Our schemas use no ``\\d``, ``\\w`` or ``\\b``, whose meanings
    differ too: tests/unit/test_digit_scan.py keeps ``\\d`` out.)"""
    out, in_class, i = [], False, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        out.append("\\Z" if char == "$" and not in_class else char)
        i += 1
    return re.compile("".join(out))


def _pattern(check: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Any:
    if check.is_type(instance, "string") and not ecma_pattern(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


# jsonschema reads ``pattern`` with Python's ``re.search``, whose ``$`` is looser.
_Validator = validators.extend(Draft202012Validator, {"pattern": _pattern})


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    """A 2020-12 validator that also checks ``format: date-time`` and reads ``pattern``
    as ECMA-262 does."""
    checker: Draft202012Validator = _Validator(schema, format_checker=format_checker())
    return checker
