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

from jsonschema import Draft202012Validator, FormatChecker

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


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    """A 2020-12 validator that also checks ``format: date-time``."""
    return Draft202012Validator(schema, format_checker=format_checker())
