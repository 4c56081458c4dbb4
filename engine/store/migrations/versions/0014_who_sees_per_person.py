"""Who may see, per person (issue 28, docs/right-people.md#who-sees-what): a principal sees what any principal of
its person sees, and a platform group's members see the requests it may approve.

* `sessions.initiator_id`, `response_candidates.responder_id`, `external_requests.requester_id`: the principal id
  of the principal beside them, indexed. A person links principal ids, and the digest of an identity (authenticator,
  issuer, type, id) cannot be made from an id alone, so "the sessions any of alice's principals started" is found
  by these. Rows written earlier get theirs here, read from their principals' JSON (an array since 0005, an
  object before), in SQL on both databases.
* `platform_groups` and `platform_group_members`: the members a platform group (a Slack user group, a GitHub team)
  had when it was last looked up, shared by every process (engine/channels/groups.py), indexed by member. A group
  is looked up again at most GROUP_MEMBERS_TTL_SECONDS later, replacing its rows; a group not looked up within the
  retention is deleted by the sweep (engine/store/retention.py).

Revision ID: 0014
Revises: 0013
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PRINCIPAL_IDS = [("sessions", "initiator"), ("response_candidates", "responder")]
"""(table, principal column): the principal id column is the principal column's, `_id`."""


def principal_id_sql(column: str, postgres: bool) -> str:
    """The principal id in a stored principal: the fourth item of its array, or `principalId` of an object."""
    if postgres:
        return f"COALESCE({column} ->> 3, {column} ->> 'principalId')"
    return f"COALESCE(json_extract({column}, '$[3]'), json_extract({column}, '$.principalId'))"


def upgrade() -> None:
    postgres = op.get_context().dialect.name == "postgresql"
    for table, column in PRINCIPAL_IDS:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column(f"{column}_id", sa.String(length=200), nullable=True))
        op.execute(f"UPDATE {table} SET {column}_id = {principal_id_sql(column, postgres)} "
                   f"WHERE {column} IS NOT NULL")
    with op.batch_alter_table("external_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("requester_id", sa.String(length=200), nullable=True))
    op.execute("UPDATE external_requests SET requester_id = (SELECT "
               f"{principal_id_sql('requested_by', postgres)} FROM input_requests "
               "WHERE input_requests.request_id = external_requests.request_id)")
    op.create_index("ix_sessions_initiator_id_created_at", "sessions", ["initiator_id", "created_at", "id"],
                    unique=False)
    op.create_index("ix_response_candidates_responder_id_request_id", "response_candidates",
                    ["responder_id", "request_id"], unique=False)
    op.create_index(op.f("ix_external_requests_requester_id"), "external_requests", ["requester_id"], unique=False)
    op.create_table(
        "platform_groups",
        sa.Column("item", sa.String(length=200), nullable=False),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("item", name=op.f("pk_platform_groups")),
    )
    op.create_table(
        "platform_group_members",
        sa.Column("item", sa.String(length=200), nullable=False),
        sa.Column("principal_id", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(["item"], ["platform_groups.item"],
                                name=op.f("fk_platform_group_members_item_platform_groups"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("item", "principal_id", name=op.f("pk_platform_group_members")),
    )
    op.create_index(op.f("ix_platform_group_members_principal_id"), "platform_group_members", ["principal_id"],
                    unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_platform_group_members_principal_id"), table_name="platform_group_members")
    op.drop_table("platform_group_members")
    op.drop_table("platform_groups")
    op.drop_index(op.f("ix_external_requests_requester_id"), table_name="external_requests")
    op.drop_index("ix_response_candidates_responder_id_request_id", table_name="response_candidates")
    op.drop_index("ix_sessions_initiator_id_created_at", table_name="sessions")
    with op.batch_alter_table("external_requests", schema=None) as batch_op:
        batch_op.drop_column("requester_id")
    for table, column in PRINCIPAL_IDS:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column(f"{column}_id")
