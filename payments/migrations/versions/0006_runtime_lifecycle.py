"""runtime lifecycle: verification reports, domain requests, operator actions

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22

Reserved in advance so that parallel work keeps one linear history; a revision with
nothing to do stays a no-op.
"""

from __future__ import annotations

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
