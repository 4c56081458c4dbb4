"""Storage that stays small and fast: indexes for the sweep and the session list, and a tally of pruned rows.

* `ix_inbound_unprocessed_received_at`: a partial index holding only the inbound items not applied yet, which
  sweep() looks for every few seconds (it read the whole `inbound` table: 33 ms at 300k rows);
* `ix_inbound_received_at`: the oldest inbound rows first, which sweep() prunes once they are older than
  HITL_RETENTION_DAYS;
* `ix_sessions_created_at_id`: the session list's order, newest first (it sorted every session);
* `pruned_inbound`: per channel, the deliveries and duplicates the pruned rows counted, so that the webhook
  counters of /metrics never go down.

On PostgreSQL each CREATE INDEX holds writes to its table while it builds: about a second per 300k rows.

Revision ID: 0007
Revises: 0006
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UNPROCESSED = sa.text("processed_at IS NULL AND item IS NOT NULL")


def upgrade() -> None:
    op.create_index("ix_inbound_unprocessed_received_at", "inbound", ["received_at"], unique=False,
                    postgresql_where=UNPROCESSED, sqlite_where=UNPROCESSED)
    op.create_index("ix_inbound_received_at", "inbound", ["received_at"], unique=False)
    op.create_index("ix_sessions_created_at_id", "sessions", ["created_at", "id"], unique=False)
    op.create_table(
        "pruned_inbound",
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("deliveries", sa.BigInteger(), nullable=False),
        sa.Column("duplicates", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("channel", name=op.f("pk_pruned_inbound")),
    )


def downgrade() -> None:
    op.drop_table("pruned_inbound")
    op.drop_index("ix_sessions_created_at_id", table_name="sessions")
    op.drop_index("ix_inbound_received_at", table_name="inbound")
    op.drop_index("ix_inbound_unprocessed_received_at", table_name="inbound")
