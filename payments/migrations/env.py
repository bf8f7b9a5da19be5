"""Alembic environment: the connection comes from :mod:`payments.migrate`, never from a file."""

from __future__ import annotations

from alembic import context

from payments import models  # noqa: F401  (registers the tables on Base.metadata)
from payments.db import Base
from payments.developer import models as developer_models  # noqa: F401

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata,
                  render_as_batch=connection.dialect.name == "sqlite", compare_type=True)
with context.begin_transaction():
    context.run_migrations()
