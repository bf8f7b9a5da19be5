"""Config revisions (``zcfgrev_``): every apply that changed something, as applied and the
state it left."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from payments.db import Base, id_column, time_column
from payments.ids import IdPrefix


class ConfigRevision(Base):
    """One applied config. ``number`` counts an app's revisions from 1; its uniqueness per
    app is what lets exactly one of two concurrent applies on the same base land."""

    __tablename__ = "config_revisions"
    __table_args__ = (UniqueConstraint("app_id", "number"),)

    id: Mapped[str] = id_column(IdPrefix.CONFIG_REVISION)
    app_id: Mapped[str] = mapped_column(ForeignKey("apps.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    mode: Mapped[str] = mapped_column(String(8))
    # The document as applied (the secret guard has refused any secret in it).
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    # The app as this apply left it, every field config manages, as an svc.config.v1
    # document (payments.config.state): what a rollback to this revision restores. None:
    # recorded before revisions kept it (migration 0012), or not recordable (a value set
    # outside config looked like a secret).
    state: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True),
                                                          default=None)
    # The plan's ops as shown (``Op.as_dict``): a before value set outside config that looks
    # like a secret is withheld.
    ops: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    summary: Mapped[dict[str, int]] = mapped_column(JSON)
    applied_by: Mapped[str] = mapped_column(String(48))  # developer id
    via: Mapped[str] = mapped_column(String(16))  # "cli" (a grant) or "console"
    rollback_of: Mapped[str | None] = mapped_column(String(48), default=None)
    created_at: Mapped[datetime] = time_column()
