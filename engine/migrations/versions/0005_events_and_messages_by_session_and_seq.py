"""Events and messages are keyed by (session_id, seq): no surrogate id, no second index.

Every read finds them by session and seq (a stream from a seq on, the transcript in order), which the unique
constraint already indexed; the `id` column and its primary-key index only cost bytes: about 180 per parked
turn (four events and two messages).

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

TABLES = ("events", "messages")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(f"uq_{table}_session_id_seq", type_="unique")
            batch_op.drop_constraint(f"pk_{table}", type_="primary")
            batch_op.drop_column("id")
            batch_op.create_primary_key(f"pk_{table}", ["session_id", "seq"])


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(f"pk_{table}", type_="primary")
            batch_op.add_column(sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                                          sa.Identity(), nullable=False))
            batch_op.create_primary_key(f"pk_{table}", ["id"])
            batch_op.create_unique_constraint(f"uq_{table}_session_id_seq", ["session_id", "seq"])
