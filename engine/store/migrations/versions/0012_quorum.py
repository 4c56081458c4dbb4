"""Approvals that take several people (docs/right-people.md, engine/answers/quorum.py).

* `external_requests.quorum`: how many distinct people must approve an external request (POST /api/requests'
  `quorum`); null is one. Its `request_approvers` rows may now name people, groups and platform groups
  (`person:alice`, `group:finance`, `slack-usergroup:S1`, `github-team:acme/release`) besides principal ids.

Adding a nullable column rewrites nothing.

Revision ID: 0012
Revises: 0011
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("external_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("quorum", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("external_requests", schema=None) as batch_op:
        batch_op.drop_column("quorum")
