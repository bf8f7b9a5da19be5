"""Alembic environment: the connection comes from :mod:`payments.migrate`, never from a file."""

from __future__ import annotations

from typing import Any, Literal

from alembic import context

from payments import models  # noqa: F401  (registers the tables on Base.metadata)
from payments.config import models as config_models  # noqa: F401
from payments.db import Base, UtcDateTime
from payments.developer import models as developer_models  # noqa: F401
from payments.ledger import models as ledger_models  # noqa: F401


def render_item(type_: str, obj: Any, autogen_context: Any) -> str | Literal[False]:
    # Migrations spell plain SQL types, never our Python-side decorators.
    if type_ == "type" and isinstance(obj, UtcDateTime):
        return "sa.DateTime(timezone=True)"
    return False


connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata,
                  render_as_batch=connection.dialect.name == "sqlite", compare_type=True,
                  render_item=render_item)
with context.begin_transaction():
    context.run_migrations()
