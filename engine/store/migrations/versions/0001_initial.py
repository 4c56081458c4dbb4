"""Initial schema: every table in engine/store/tables/.

Revision ID: 0001
Revises:
Create Date: 2026-12-02 12:58:06.288141

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# revision identifiers, used by Alembic.
revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# engine.store.tables' types spelled portably (a revision must not import models that will change after it):
# UTCDateTime is DateTime(timezone=True) underneath; ids are INTEGER on SQLite, so they alias the rowid
# and autoincrement, and BIGSERIAL on PostgreSQL.
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table(
        "contacts",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("address", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_contacts")),
        sa.UniqueConstraint("channel", "address", name=op.f("uq_contacts_channel_address")),
    )
    op.create_table(
        "inbound",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("external_id", sa.String(length=200), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("principal", JSON, nullable=True),
        sa.Column("payload_digest", sa.String(length=64), nullable=False),
        sa.Column("item", JSON, nullable=True),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("duplicates", sa.Integer(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_inbound")),
        sa.UniqueConstraint("channel", "external_id", name=op.f("uq_inbound_channel_external_id")),
    )
    op.create_table(
        "outbox",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("job", sa.String(length=64), nullable=False),
        sa.Column("args", JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("available_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("enqueued_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
    )
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.create_index("ix_outbox_enqueued_at_available_at", ["enqueued_at", "available_at"], unique=False)

    op.create_table(
        "sessions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("agent", sa.String(length=200), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("address", sa.String(length=500), nullable=False),
        sa.Column("initiator", JSON, nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("event_seq", sa.Integer(), nullable=False),
        sa.Column("message_seq", sa.Integer(), nullable=False),
        sa.Column("delivered_seq", sa.Integer(), nullable=False),
        sa.Column("delivery_lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("delivery_queued", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sessions")),
    )
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.create_index("ix_sessions_channel_address", ["channel", "address"], unique=False)

    op.create_table(
        "approval_grants",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("approval_key", sa.String(length=200), nullable=False),
        sa.Column("granted_by", JSON, nullable=False),
        sa.Column("request_id", sa.String(length=80), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name=op.f("fk_approval_grants_session_id_sessions"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_approval_grants")),
    )
    with op.batch_alter_table("approval_grants", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_approval_grants_session_id"), ["session_id"], unique=False)

    op.create_table(
        "events",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(length=40), nullable=False),
        sa.Column("turn_id", sa.String(length=64), nullable=True),
        sa.Column("data", JSON, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name=op.f("fk_events_session_id_sessions"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        sa.UniqueConstraint("session_id", "seq", name=op.f("uq_events_session_id_seq")),
    )
    op.create_table(
        "posts",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("ref", sa.String(length=200), nullable=True),
        sa.Column("data", JSON, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name=op.f("fk_posts_session_id_sessions"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_posts")),
        sa.UniqueConstraint("session_id", "key", name=op.f("uq_posts_session_id_key")),
    )
    op.create_table(
        "turns",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("requested_by", JSON, nullable=True),
        sa.Column("input", sa.Text(), nullable=False),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("error", JSON, nullable=True),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("step_budget", sa.Integer(), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name=op.f("fk_turns_session_id_sessions"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_turns")),
        sa.UniqueConstraint("session_id", "seq", name=op.f("uq_turns_session_id_seq")),
    )
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.create_index("ix_turns_status_updated_at", ["status", "updated_at"], unique=False)

    op.create_table(
        "messages",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("turn_id", sa.String(length=64), nullable=True),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=True),
        sa.Column("tool_calls", JSON, nullable=True),
        sa.Column("tool_call_id", sa.String(length=64), nullable=True),
        sa.Column("principal", JSON, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name=op.f("fk_messages_session_id_sessions"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["turn_id"], ["turns.id"], name=op.f("fk_messages_turn_id_turns"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_messages")),
        sa.UniqueConstraint("session_id", "seq", name=op.f("uq_messages_session_id_seq")),
    )
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_messages_turn_id"), ["turn_id"], unique=False)

    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("turn_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", JSON, nullable=True),
        sa.ForeignKeyConstraint(["turn_id"], ["turns.id"], name=op.f("fk_runs_turn_id_turns"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint("turn_id", "seq", name=op.f("uq_runs_turn_id_seq")),
    )
    op.create_table(
        "input_requests",
        sa.Column("request_id", sa.String(length=80), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("turn_id", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("call_id", sa.String(length=64), nullable=True),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=24), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("action", JSON, nullable=True),
        sa.Column("options", JSON, nullable=False),
        sa.Column("allow_freeform", sa.Boolean(), nullable=False),
        sa.Column("display", sa.String(length=16), nullable=False),
        sa.Column("requested_by", JSON, nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("response", JSON, nullable=True),
        sa.Column("responder", JSON, nullable=True),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_input_requests_run_id_runs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name=op.f("fk_input_requests_session_id_sessions"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["turn_id"], ["turns.id"], name=op.f("fk_input_requests_turn_id_turns"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("request_id", name=op.f("pk_input_requests")),
    )
    with op.batch_alter_table("input_requests", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_input_requests_call_id"), ["call_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_input_requests_run_id"), ["run_id"], unique=False)
        batch_op.create_index("ix_input_requests_session_id_seq", ["session_id", "seq"], unique=False)
        batch_op.create_index("ix_input_requests_status_created_at", ["status", "created_at"], unique=False)
        batch_op.create_index("ix_input_requests_status_expires_at", ["status", "expires_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_input_requests_turn_id"), ["turn_id"], unique=False)

    op.create_table(
        "tool_calls",
        sa.Column("call_id", sa.String(length=64), nullable=False),
        sa.Column("turn_id", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("tool", sa.String(length=200), nullable=False),
        sa.Column("input", JSON, nullable=False),
        sa.Column("input_hash", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=24), nullable=False),
        sa.Column("result", JSON, nullable=True),
        sa.Column("approval_request_id", sa.String(length=80), nullable=True),
        sa.Column("responder", JSON, nullable=True),
        sa.Column("verdict", JSON, nullable=True),
        sa.Column("stored_steps", JSON, nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("interrupted", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_tool_calls_run_id_runs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["turn_id"], ["turns.id"], name=op.f("fk_tool_calls_turn_id_turns"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("call_id", name=op.f("pk_tool_calls")),
    )
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tool_calls_run_id"), ["run_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_tool_calls_turn_id"), ["turn_id"], unique=False)

    op.create_table(
        "response_candidates",
        sa.Column("candidate_id", sa.String(length=64), nullable=False),
        sa.Column("request_id", sa.String(length=80), nullable=False),
        sa.Column("responder", JSON, nullable=False),
        sa.Column("decision", sa.String(length=200), nullable=True),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("judged_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["request_id"],
            ["input_requests.request_id"],
            name=op.f("fk_response_candidates_request_id_input_requests"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("candidate_id", name=op.f("pk_response_candidates")),
    )
    with op.batch_alter_table("response_candidates", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_response_candidates_request_id"), ["request_id"], unique=False)


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table("response_candidates", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_response_candidates_request_id"))

    op.drop_table("response_candidates")
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tool_calls_turn_id"))
        batch_op.drop_index(batch_op.f("ix_tool_calls_run_id"))

    op.drop_table("tool_calls")
    with op.batch_alter_table("input_requests", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_input_requests_turn_id"))
        batch_op.drop_index("ix_input_requests_status_expires_at")
        batch_op.drop_index("ix_input_requests_status_created_at")
        batch_op.drop_index("ix_input_requests_session_id_seq")
        batch_op.drop_index(batch_op.f("ix_input_requests_run_id"))
        batch_op.drop_index(batch_op.f("ix_input_requests_call_id"))

    op.drop_table("input_requests")
    op.drop_table("runs")
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_messages_turn_id"))

    op.drop_table("messages")
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.drop_index("ix_turns_status_updated_at")

    op.drop_table("turns")
    op.drop_table("posts")
    op.drop_table("events")
    with op.batch_alter_table("approval_grants", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_approval_grants_session_id"))

    op.drop_table("approval_grants")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_sessions_channel_address")

    op.drop_table("sessions")
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.drop_index("ix_outbox_enqueued_at_available_at")

    op.drop_table("outbox")
    op.drop_table("inbound")
    op.drop_table("contacts")
