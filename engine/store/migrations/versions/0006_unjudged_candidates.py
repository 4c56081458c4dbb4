"""Candidates never judged: a partial index on `response_candidates.created_at` where `judged_at` is null.

sweep() judges again a candidate whose process died while its response policy ran; the index holds only
those not judged yet (a few, for the seconds a policy runs), so finding them costs nothing however many
responses were ever recorded.

Revision ID: 0006
Revises: 0005
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UNJUDGED = sa.text("judged_at IS NULL")


def upgrade() -> None:
    op.create_index("ix_response_candidates_unjudged_created_at", "response_candidates", ["created_at"],
                    unique=False, postgresql_where=UNJUDGED, sqlite_where=UNJUDGED)


def downgrade() -> None:
    op.drop_index("ix_response_candidates_unjudged_created_at", table_name="response_candidates")
