"""External requests: InputRequests that agents running elsewhere make through `POST /api/requests`.

* `input_requests.turn_id` and `run_id` may be NULL: an external request lives in a session but no turn waits
  on it (settling it closes it and calls its callback back; nothing resumes);
* `external_requests`: what such a request holds beyond the InputRequest: the digest of its requester's identity
  and its idempotency key (unique together: the same key from the same agent finds the same request), the digest
  of the body it was made with, the agent's metadata, and its callback (URL, delivery status, attempts, last
  error, when the next attempt is due), with a partial index holding only the callbacks owed, which the sweep
  reads;
* `request_approvers`: the principal ids named in its `approvers`, any one of whom may settle it, indexed by
  principal id (the requests a key is asked, engine/store/access.py).

A downgrade deletes the external requests (their rows could not stand without a turn).

Revision ID: 0009
Revises: 0008
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# engine.store.storage's types spelled here (a revision must not import models that will change after it)
REQUEST_ID = sa.String(80).with_variant(postgresql.BYTEA(), "postgresql")
ID = sa.String(64).with_variant(postgresql.BYTEA(), "postgresql")
DIGEST = sa.String(64).with_variant(postgresql.BYTEA(), "postgresql")
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
OWED = sa.text("callback_due_at IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table("input_requests", schema=None) as batch_op:
        batch_op.alter_column("turn_id", existing_type=ID, nullable=True)
        batch_op.alter_column("run_id", existing_type=ID, nullable=True)
    op.create_table(
        "external_requests",
        sa.Column("request_id", REQUEST_ID, nullable=False),
        sa.Column("requester_digest", DIGEST, nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("body_digest", DIGEST, nullable=False),
        sa.Column("metadata", JSON, nullable=True),
        sa.Column("callback_url", sa.Text(), nullable=True),
        sa.Column("callback_status", sa.String(length=16), nullable=True),
        sa.Column("callback_attempts", sa.Integer(), nullable=False),
        sa.Column("callback_error", sa.Text(), nullable=True),
        sa.Column("callback_due_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["request_id"], ["input_requests.request_id"],
                                name=op.f("fk_external_requests_request_id_input_requests"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("request_id", name=op.f("pk_external_requests")),
        sa.UniqueConstraint("requester_digest", "idempotency_key",
                            name=op.f("uq_external_requests_requester_digest_idempotency_key")),
    )
    op.create_index("ix_external_requests_callback_due_at", "external_requests", ["callback_due_at"], unique=False,
                    postgresql_where=OWED, sqlite_where=OWED)
    op.create_table(
        "request_approvers",
        sa.Column("request_id", REQUEST_ID, nullable=False),
        sa.Column("principal_id", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(["request_id"], ["input_requests.request_id"],
                                name=op.f("fk_request_approvers_request_id_input_requests"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("request_id", "principal_id", name=op.f("pk_request_approvers")),
    )
    op.create_index("ix_request_approvers_principal_id", "request_approvers", ["principal_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_request_approvers_principal_id", table_name="request_approvers")
    op.drop_table("request_approvers")
    op.drop_index("ix_external_requests_callback_due_at", table_name="external_requests")
    op.drop_table("external_requests")
    # SQLite migrates with its foreign keys off (env.py): the candidates go by hand, as a cascade would take them
    op.execute("DELETE FROM response_candidates WHERE request_id IN "
               "(SELECT request_id FROM input_requests WHERE turn_id IS NULL)")
    op.execute("DELETE FROM input_requests WHERE turn_id IS NULL")
    with op.batch_alter_table("input_requests", schema=None) as batch_op:
        batch_op.alter_column("run_id", existing_type=ID, nullable=False)
        batch_op.alter_column("turn_id", existing_type=ID, nullable=False)
