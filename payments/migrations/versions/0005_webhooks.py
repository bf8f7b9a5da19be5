"""webhooks: endpoints, signing secrets, dispatch attempts

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22

Reserved in advance so that parallel work keeps one linear history; a revision with
nothing to do stays a no-op.
"""

from __future__ import annotations

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
