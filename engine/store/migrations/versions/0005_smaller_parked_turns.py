"""Smaller parked turns: ids and digests packed on PostgreSQL; events and messages keyed by (session_id, seq);
no index on input_requests.call_id.

On PostgreSQL every id column becomes `bytea` holding `engine.store.storage.pack_id`: one of our ids (`ses_`,
`turn_`... and 26 base32 characters) as its prefix's number and its 16 bytes, any other string as a zero
byte and its UTF-8. A parked turn holds its ids about 45 times in rows and index entries: 17 bytes each
instead of 31. The conversion runs in the database: `hitl_pack_id(text)` below follows the same rule as
`pack_id`, and it stays, with `hitl_unpack_id(bytea)`, for SQL by hand (`SELECT hitl_unpack_id(id) FROM
turns WHERE id = hitl_pack_id('turn_...')`). The foreign keys between id columns are dropped while the
columns change and made again. SHA-256 digests (a call's input
hash, an inbound payload's) become their 32 bytes instead of 64 hex characters.

Every read finds events and messages by session and seq (a stream from a seq on, the transcript in order),
which their unique constraint already indexed: the surrogate `id` column and its primary-key index only
cost bytes. A call's requests are looked up within its turn, by the turn's index. A session opened without
an address (the REST API's) stores "" instead of `<channel>:<session id>:`, which it still reads as.

(The same release stores principals, a request's action, a call's verdict and the model's calls as JSON
arrays without their keys, and built-in options by id; values stored as objects read as they were, so those
need no data changes.)

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

IDS = {
    "sessions": ["id"],
    "turns": ["id", "session_id"],
    "runs": ["id", "turn_id"],
    "messages": ["session_id", "turn_id", "tool_call_id"],
    "tool_calls": ["call_id", "turn_id", "run_id", "approval_request_id"],
    "input_requests": ["request_id", "session_id", "turn_id", "run_id", "call_id"],
    "response_candidates": ["candidate_id", "request_id"],
    "approval_grants": ["session_id", "request_id"],
    "events": ["session_id", "turn_id"],
    "posts": ["session_id"],
}
"""The id columns, by table (80 characters for request ids, 64 for the others, as varchar)."""

FOREIGN_KEYS = [
    ("turns", "session_id", "sessions", "id"), ("runs", "turn_id", "turns", "id"),
    ("messages", "session_id", "sessions", "id"), ("messages", "turn_id", "turns", "id"),
    ("tool_calls", "turn_id", "turns", "id"), ("tool_calls", "run_id", "runs", "id"),
    ("input_requests", "session_id", "sessions", "id"), ("input_requests", "turn_id", "turns", "id"),
    ("input_requests", "run_id", "runs", "id"), ("response_candidates", "request_id", "input_requests", "request_id"),
    ("approval_grants", "session_id", "sessions", "id"), ("events", "session_id", "sessions", "id"),
    ("posts", "session_id", "sessions", "id"),
]
"""The foreign keys between id columns (all ON DELETE CASCADE)."""

DIGESTS = [("tool_calls", "input_hash"), ("inbound", "payload_digest")]
"""SHA-256 digests, stored as bytes instead of hex on PostgreSQL."""

CODEC = r"""
CREATE OR REPLACE FUNCTION hitl_pack_id(id text) RETURNS bytea LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  code int := array_position(ARRAY['ses', 'turn', 'run', 'call', 'req', 'cand'], split_part(id, '_', 1));
  body text := substr(id, strpos(id, '_') + 1);
  packed bytea;
  acc bigint := 0;
  bits int := 0;
BEGIN
  IF code IS NULL OR body !~ '^[a-z2-7]{26}$' THEN
    RETURN '\x00'::bytea || convert_to(id, 'UTF8');
  END IF;
  packed := set_byte('\x00'::bytea, 0, code);
  FOR i IN 1..26 LOOP
    acc := (acc << 5) | (strpos('abcdefghijklmnopqrstuvwxyz234567', substr(body, i, 1)) - 1);
    bits := bits + 5;
    IF bits >= 8 THEN
      bits := bits - 8;
      packed := packed || set_byte('\x00'::bytea, 0, ((acc >> bits) & 255)::int);
      acc := acc & ((1::bigint << bits) - 1);
    END IF;
  END LOOP;
  IF acc <> 0 THEN  -- not what base32 of 16 bytes ends with: not one of ours
    RETURN '\x00'::bytea || convert_to(id, 'UTF8');
  END IF;
  RETURN packed;
END $$;
CREATE OR REPLACE FUNCTION hitl_unpack_id(packed bytea) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  id text := '';
  acc bigint := 0;
  bits int := 0;
BEGIN
  IF get_byte(packed, 0) = 0 THEN
    RETURN convert_from(substr(packed, 2), 'UTF8');
  END IF;
  FOR i IN 1..16 LOOP
    acc := (acc << 8) | get_byte(packed, i);
    bits := bits + 8;
    WHILE bits >= 5 LOOP
      bits := bits - 5;
      id := id || substr('abcdefghijklmnopqrstuvwxyz234567', ((acc >> bits) & 31)::int + 1, 1);
    END LOOP;
    acc := acc & ((1::bigint << bits) - 1);
  END LOOP;
  id := id || substr('abcdefghijklmnopqrstuvwxyz234567', ((acc << (5 - bits)) & 31)::int + 1, 1);
  RETURN (ARRAY['ses', 'turn', 'run', 'call', 'req', 'cand'])[get_byte(packed, 0)] || '_' || id;
END $$;
"""


def convert_ids(to_type: str, function: str) -> None:
    """Every id column to `to_type` through `function` (made, or made again, first), with the foreign keys
    between them dropped meanwhile (PostgreSQL only)."""
    for table, column, referred, _ in FOREIGN_KEYS:
        op.drop_constraint(f"fk_{table}_{column}_{referred}", table, type_="foreignkey")
    op.execute(CODEC)
    for table, columns in IDS.items():
        op.execute(f"ALTER TABLE {table} " + ", ".join(
            f"ALTER COLUMN {c} TYPE {to_type.format(80 if c.endswith('request_id') else 64)} USING "
            f"{function}({c})" for c in columns))
    for table, column, referred, referred_column in FOREIGN_KEYS:
        op.create_foreign_key(f"fk_{table}_{column}_{referred}", table, referred, [column], [referred_column],
                              ondelete="CASCADE")


def upgrade() -> None:
    for table in KEYED:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(f"uq_{table}_session_id_seq", type_="unique")
            batch_op.drop_constraint(f"pk_{table}", type_="primary")
            batch_op.drop_column("id")
            batch_op.create_primary_key(f"pk_{table}", ["session_id", "seq"])
    op.drop_index("ix_input_requests_call_id", table_name="input_requests")
    op.execute("UPDATE sessions SET address = '' WHERE address = channel || ':' || id || ':'")
    if op.get_context().dialect.name == "postgresql":
        convert_ids("bytea", "hitl_pack_id")
        for table, column in DIGESTS:
            op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE bytea USING decode({column}, 'hex')")


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        convert_ids("varchar({})", "hitl_unpack_id")
        for table, column in DIGESTS:
            op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE varchar(64) USING encode({column}, 'hex')")
        op.execute("DROP FUNCTION hitl_pack_id(text); DROP FUNCTION hitl_unpack_id(bytea)")
    op.execute("UPDATE sessions SET address = channel || ':' || id || ':' WHERE address = ''")
    op.create_index("ix_input_requests_call_id", "input_requests", ["call_id"], unique=False)
    for table in KEYED:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(f"pk_{table}", type_="primary")
            batch_op.add_column(sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                                          sa.Identity(), nullable=False))
            batch_op.create_primary_key(f"pk_{table}", ["id"])
            batch_op.create_unique_constraint(f"uq_{table}_session_id_seq", ["session_id", "seq"])
