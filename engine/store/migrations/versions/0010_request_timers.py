"""Requests that do not rot: reminders, escalation and what expiry means (docs/reminders-and-timeouts.md).

* `request_timers`: a request's next reminder and its escalation, each a row with a due time that the sweep
  claims by compare-and-set, with a partial index holding only the rows still to fall due (the sweep reads a few
  index entries however many requests wait);
* `request_places`: the sessions besides its own where a request is shown (the places it escalated to), indexed
  by session (a delivery there reads them);
* `escalation_approvers`: the principal ids an escalation added, who may settle the request too and are asked it
  (indexed by principal id: a key's inbox reads them);
* `input_requests.on_timeout` (what expiry means when it is not the kind's default: `approve`), `reminded` (how
  many reminders went out) and `escalated_at`.

Adding the columns rewrites nothing: `reminded`'s default is a constant.

Revision ID: 0010
Revises: 0009
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# engine.store.storage's types spelled here (a revision must not import models that will change after it)
REQUEST_ID = sa.String(80).with_variant(postgresql.BYTEA(), "postgresql")
ID = sa.String(64).with_variant(postgresql.BYTEA(), "postgresql")
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
DUE = sa.text("due_at IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table("input_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("on_timeout", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("reminded", sa.Integer(), server_default="0", nullable=False))
        batch_op.add_column(sa.Column("escalated_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "request_timers",
        sa.Column("request_id", REQUEST_ID, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("every", sa.Float(), nullable=True),
        sa.Column("max", sa.Integer(), nullable=True),
        sa.Column("data", JSON, nullable=True),
        sa.ForeignKeyConstraint(["request_id"], ["input_requests.request_id"],
                                name=op.f("fk_request_timers_request_id_input_requests"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("request_id", "kind", name=op.f("pk_request_timers")),
    )
    op.create_index("ix_request_timers_due_at", "request_timers", ["due_at"], unique=False,
                    postgresql_where=DUE, sqlite_where=DUE)
    op.create_table(
        "request_places",
        sa.Column("request_id", REQUEST_ID, nullable=False),
        sa.Column("session_id", ID, nullable=False),
        sa.ForeignKeyConstraint(["request_id"], ["input_requests.request_id"],
                                name=op.f("fk_request_places_request_id_input_requests"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"],
                                name=op.f("fk_request_places_session_id_sessions"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("request_id", "session_id", name=op.f("pk_request_places")),
    )
    op.create_index(op.f("ix_request_places_session_id"), "request_places", ["session_id"], unique=False)
    op.create_table(
        "escalation_approvers",
        sa.Column("request_id", REQUEST_ID, nullable=False),
        sa.Column("principal_id", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(["request_id"], ["input_requests.request_id"],
                                name=op.f("fk_escalation_approvers_request_id_input_requests"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("request_id", "principal_id", name=op.f("pk_escalation_approvers")),
    )
    op.create_index(op.f("ix_escalation_approvers_principal_id"), "escalation_approvers", ["principal_id"],
                    unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_escalation_approvers_principal_id"), table_name="escalation_approvers")
    op.drop_table("escalation_approvers")
    op.drop_index(op.f("ix_request_places_session_id"), table_name="request_places")
    op.drop_table("request_places")
    op.drop_index("ix_request_timers_due_at", table_name="request_timers")
    op.drop_table("request_timers")
    with op.batch_alter_table("input_requests", schema=None) as batch_op:
        batch_op.drop_column("escalated_at")
        batch_op.drop_column("reminded")
        batch_op.drop_column("on_timeout")
