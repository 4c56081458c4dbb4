"""Who may see what: `sessions.initiator_digest` and `response_candidates.responder_digest`, indexed.

An API key of the `user` or `agent` role sees the sessions its principal started and the requests it is asked
(of those sessions, or ones it already responded to). Principals are stored as JSON; beside each of these
two a short column holds the SHA-256 of its identity (`engine.store.storage.principal_digest`: 32 bytes on
PostgreSQL, 64 hex characters on SQLite), so a key's sessions and requests are found by index, in SQL, page by
page. Rows written earlier get theirs here: on PostgreSQL by one UPDATE (offline SQL too), on SQLite, which
has no SHA-256 function, in batches from Python.

Revision ID: 0008
Revises: 0007
"""

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DIGESTS = [("sessions", "id", "initiator"), ("response_candidates", "candidate_id", "responder")]
"""(table, primary key, principal column): the digest column is the principal column's, `_digest`."""
IDENTITY = ("authenticator", "issuer", "principalType", "principalId")
"""A principal is stored as the array of these (and its attributes), or, before 0005, as an object."""
BATCH = 1000


def upgrade() -> None:
    postgres = op.get_context().dialect.name == "postgresql"
    for table, key, column in DIGESTS:
        op.add_column(table, sa.Column(f"{column}_digest", postgresql.BYTEA() if postgres else sa.String(64),
                                       nullable=True))
        if postgres:
            op.execute(f"UPDATE {table} SET {column}_digest = {digest_sql(column)} WHERE {column} IS NOT NULL")
        else:
            fill(table, key, column)
    op.create_index("ix_sessions_initiator_digest_created_at", "sessions", ["initiator_digest", "created_at", "id"],
                    unique=False)
    op.create_index("ix_response_candidates_responder_digest_request_id", "response_candidates",
                    ["responder_digest", "request_id"], unique=False)


def digest_sql(column: str) -> str:
    """`engine.store.storage.principal_digest` in PostgreSQL: the identity's four fields joined by U+001F, hashed."""
    fields = ", ".join(f"COALESCE({column} ->> {position}, {column} ->> '{name}')"
                       for position, name in enumerate(IDENTITY))
    return f"sha256(convert_to(concat_ws(chr(31), {fields}), 'UTF8'))"


def fill(table: str, key: str, column: str) -> None:
    """SQLite: each row's digest, computed here as `principal_digest` does, written back in batches."""
    rows = sa.table(table, sa.column(key), sa.column(column), sa.column(f"{column}_digest"))
    update = rows.update().where(rows.c[key] == sa.bindparam("row_key")) \
        .values({f"{column}_digest": sa.bindparam("digest")})
    conn = op.get_bind()
    found = conn.execute(sa.select(rows.c[key], rows.c[column]).where(rows.c[column].is_not(None))).all()
    for start in range(0, len(found), BATCH):
        conn.execute(update, [{"row_key": row_key, "digest": digest(json.loads(stored))}
                              for row_key, stored in found[start:start + BATCH]])


def digest(stored: Any) -> str:
    fields = stored[:len(IDENTITY)] if isinstance(stored, list) else [stored[name] for name in IDENTITY]
    return hashlib.sha256("\x1f".join(str(field) for field in fields).encode()).hexdigest()


def downgrade() -> None:
    op.drop_index("ix_response_candidates_responder_digest_request_id", table_name="response_candidates")
    op.drop_index("ix_sessions_initiator_digest_created_at", table_name="sessions")
    for table, _, column in DIGESTS:
        op.drop_column(table, f"{column}_digest")
