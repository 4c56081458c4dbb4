"""Requests shown where the approvers are (issue 28, docs/right-people.md): `input_requests.shown_in_session`,
false for a request shown only at its `show_to` places (`show_in_session=False`), not in its own session's channel,
and `shown_elsewhere`, true for a request with places (`request_places` rows, as an escalation's are), so closing
one without places reads none.

Adding the columns rewrites nothing: their defaults are constants.

Revision ID: 0013
Revises: 0012 (0012_quorum; 0011, then 0010, before h28-quorum and h28-people merged theirs)
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("input_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("shown_in_session", sa.Boolean(), server_default=sa.true(), nullable=False))
        batch_op.add_column(sa.Column("shown_elsewhere", sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("input_requests", schema=None) as batch_op:
        batch_op.drop_column("shown_elsewhere")
        batch_op.drop_column("shown_in_session")
