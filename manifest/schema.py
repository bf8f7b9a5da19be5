"""The runtime manifest JSON Schema (2020-12), served at
``{docs_url}/runtime-manifest.schema.json`` (spec 1.1).

The packaged file carries no ``$id``: where it lives depends on the deployment's
``{docs_url}``, so :func:`published_schema` adds it when the docs host serves it.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

FILE_NAME = "runtime-manifest.schema.json"
MEDIA_TYPE = "application/schema+json"


@cache
def _raw() -> str:
    return resources.files("manifest").joinpath(FILE_NAME).read_text(encoding="utf-8")


def load_schema() -> dict[str, Any]:
    """A fresh copy of the packaged schema."""
    schema: dict[str, Any] = json.loads(_raw())
    return schema


def published_schema(docs_url: str) -> dict[str, Any]:
    """The schema as served: ``$schema``, then ``$id`` = ``{docs_url}/<file>``, then the rest."""
    schema = load_schema()
    head = {"$schema": schema.pop("$schema"), "$id": f"{docs_url.rstrip('/')}/{FILE_NAME}"}
    return {**head, **schema}
