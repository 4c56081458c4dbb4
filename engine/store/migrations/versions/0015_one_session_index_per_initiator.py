"""One index for a key's sessions (issue 30: a parked turn's bytes): `ix_sessions_initiator_digest_created_at` is
dropped. A key's own sessions are read from `ix_sessions_initiator_id_created_at` in the list's order, its digest
checked on each row (engine/store/access.py): a principal id names one identity but for the authenticator and issuer
the digest adds, so the digest filters next to nothing. On PostgreSQL, statistics on the two columns' dependency
tell the planner so (without them it takes id and digest for independent, expects next to no row, and sorts every
session of the key rather than read the index in order). About 120 of a parked turn's bytes.

Revision ID: 0015
Revises: 0014
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_sessions_initiator_digest_created_at")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("CREATE STATISTICS st_sessions_initiator (dependencies) ON initiator_id, initiator_digest "
                   "FROM sessions")
        op.execute("ANALYZE sessions")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP STATISTICS IF EXISTS st_sessions_initiator")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.create_index("ix_sessions_initiator_digest_created_at",
                              ["initiator_digest", "created_at", "id"], unique=False)
