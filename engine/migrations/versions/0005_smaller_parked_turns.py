"""Smaller parked turns: events and messages keyed by (session_id, seq); no index on input_requests.call_id.

Every read finds events and messages by session and seq (a stream from a seq on, the transcript in order),
which their unique constraint already indexed: the surrogate `id` column and its primary-key index only
cost bytes (about 180 per parked turn: four events, two messages). A call's requests are looked up within
its turn, by the turn's index. (The same release stores principals as JSON arrays without their keys;
principals stored as objects read as they were, so no data changes here.)

Revision ID: 0005
Revises: 0004
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEYED = ("events", "messages")


def upgrade() -> None:
    for table in KEYED:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(f"uq_{table}_session_id_seq", type_="unique")
            batch_op.drop_constraint(f"pk_{table}", type_="primary")
            batch_op.drop_column("id")
            batch_op.create_primary_key(f"pk_{table}", ["session_id", "seq"])
    op.drop_index("ix_input_requests_call_id", table_name="input_requests")


def downgrade() -> None:
    op.create_index("ix_input_requests_call_id", "input_requests", ["call_id"], unique=False)
    for table in KEYED:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(f"pk_{table}", type_="primary")
            batch_op.add_column(sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                                          sa.Identity(), nullable=False))
            batch_op.create_primary_key(f"pk_{table}", ["id"])
            batch_op.create_unique_constraint(f"uq_{table}_session_id_seq", ["session_id", "seq"])
