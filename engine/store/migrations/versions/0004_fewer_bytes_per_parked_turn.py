"""Fewer bytes per parked turn: no index on columns nothing looks rows up by.

`messages.turn_id`, `tool_calls.run_id` and `input_requests.run_id` are foreign keys the engine never
searches on (the transcript is read by session and seq, a run's calls and requests through their turn).
Without them a parked turn costs three index entries less. (The same release stores `input.requested`
events by request id; events stored earlier keep their requests inline and show as they are.)

Revision ID: 0004
Revises: 0003
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DROPPED = [("messages", "turn_id"), ("tool_calls", "run_id"), ("input_requests", "run_id")]


def upgrade() -> None:
    for table, column in DROPPED:
        op.drop_index(f"ix_{table}_{column}", table_name=table)


def downgrade() -> None:
    for table, column in DROPPED:
        op.create_index(f"ix_{table}_{column}", table, [column], unique=False)
