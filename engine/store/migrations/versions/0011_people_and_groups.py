"""People and groups (docs/right-people.md, engine/people.py).

* `people`: a person's name (the key) and display name;
* `person_principals`: the principal ids a person uses, in the order given; the principal id is the key, so it
  belongs to at most one person (indexed by person: a person's principals are read together);
* `groups`, `group_members`: named sets of `person:<name>` and principal ids, in the order given (indexed by
  member: the groups a person is in).

New tables only: nothing is rewritten.

Revision ID: 0011
Revises: 0010
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "people",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("display_name", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_people")),
    )
    op.create_table(
        "person_principals",
        sa.Column("principal_id", sa.String(length=200), nullable=False),
        sa.Column("person", sa.String(length=100), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["person"], ["people.name"], name=op.f("fk_person_principals_person_people"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("principal_id", name=op.f("pk_person_principals")),
    )
    op.create_index(op.f("ix_person_principals_person"), "person_principals", ["person"], unique=False)
    op.create_table(
        "groups",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_groups")),
    )
    op.create_table(
        "group_members",
        sa.Column("group", sa.String(length=100), nullable=False),
        sa.Column("member", sa.String(length=200), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["group"], ["groups.name"], name=op.f("fk_group_members_group_groups"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("group", "member", name=op.f("pk_group_members")),
    )
    op.create_index(op.f("ix_group_members_member"), "group_members", ["member"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_group_members_member"), table_name="group_members")
    op.drop_table("group_members")
    op.drop_table("groups")
    op.drop_index(op.f("ix_person_principals_person"), table_name="person_principals")
    op.drop_table("person_principals")
    op.drop_table("people")
