"""Outbox rows leave with their job: the job's first transaction deletes its row, so no `enqueued_at` mark.

sweep() pushes again the rows whose job has not started a while after `available_at`, found by its index.

Revision ID: 0003
Revises: 0002
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.drop_index("ix_outbox_enqueued_at_available_at")
        batch_op.drop_column("enqueued_at")
        batch_op.create_index(batch_op.f("ix_outbox_available_at"), ["available_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_outbox_available_at"))
        batch_op.add_column(sa.Column("enqueued_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index("ix_outbox_enqueued_at_available_at", ["enqueued_at", "available_at"], unique=False)
