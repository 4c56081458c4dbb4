"""The Alembic history builds exactly the tables in engine/store/tables/, on SQLite and on PostgreSQL; how
those tables store what they hold."""

from __future__ import annotations

import hashlib
import io
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore
from sqlalchemy import MetaData, create_engine, inspect, select, text, type_coerce, update
from sqlalchemy.engine import make_url

from engine.protocol import Principal, api_key_principal
from engine.store.db import MIGRATIONS, Database
from engine.store.storage import JSONType, new_id, pack_id, principal_digest
from engine.store.tables import (
    Base,
    ExternalRequest,
    Inbound,
    InputRequest,
    Outbox,
    RequestApprover,
    ResponseCandidate,
    Run,
    Turn,
)
from engine.store.tables import Session as SessionRow
from tests.support.services import require_postgres


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[Database]:
    db = Database(f"sqlite:///{tmp_path / 'hitl.db'}")
    yield db
    db.dispose()


@pytest.fixture
def postgres_db() -> Iterator[Database]:
    """A Database whose connections live in a throwaway schema of the shared test PostgreSQL."""
    base_url = make_url(require_postgres())
    schema = f"test_migrations_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base_url)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    db = Database(
        base_url.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
            hide_password=False
        )
    )
    try:
        yield db
    finally:
        db.dispose()
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def test_missing_migrations_are_those_the_database_has_not_run(postgres_db: Database) -> None:
    every = postgres_db.missing_migrations()
    assert len(every) == len(list((MIGRATIONS / "versions").glob("0*.py"))) and every[-1] == "0001"

    postgres_db.upgrade("0003")
    assert postgres_db.missing_migrations() == every[:every.index("0003")]  # newest first
    postgres_db.upgrade()
    assert postgres_db.missing_migrations() == []
    with postgres_db.engine.begin() as conn:  # a newer version migrated it (a rollback): nothing is missing
        conn.execute(text("UPDATE alembic_version SET version_num = '9999_from_a_newer_version'"))
    assert postgres_db.missing_migrations() == []


def slack_stores(db: Database) -> list[MetaData]:
    """The tables of the Slack OAuth stores the gateway uses, as slack-sdk defines them (revision 0002)."""
    return [SQLAlchemyInstallationStore(client_id="any", engine=db.engine).metadata,
            SQLAlchemyOAuthStateStore(expiration_seconds=600, engine=db.engine).metadata]


def schema_differences(db: Database) -> list[object]:
    with db.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        return list(compare_metadata(context, [Base.metadata, *slack_stores(db)]))


def assert_ids_autoincrement(db: Database) -> None:
    now = datetime.now(UTC)
    with db.write() as session:
        session.add_all([Outbox(job="a", args=[], available_at=now), Outbox(job="b", args=[1])])
    with db.read() as session:
        ids = session.scalars(select(Outbox.id).order_by(Outbox.id)).all()
    assert len(ids) == 2 and ids[0] < ids[1]


def test_upgrade_on_sqlite_matches_the_tables(sqlite_db: Database) -> None:
    sqlite_db.upgrade()

    assert schema_differences(sqlite_db) == []
    assert_ids_autoincrement(sqlite_db)


def test_upgrade_on_postgres_matches_the_tables(postgres_db: Database) -> None:
    postgres_db.upgrade()

    assert schema_differences(postgres_db) == []
    assert_ids_autoincrement(postgres_db)
    with postgres_db.engine.connect() as conn:
        assert conn.scalar(text("SELECT current_schema()")).startswith("test_migrations_")


def test_downgrade_to_base_then_upgrade_again_on_sqlite(sqlite_db: Database) -> None:
    sqlite_db.upgrade()
    command.downgrade(sqlite_db.alembic_config(), "base")

    assert inspect(sqlite_db.engine).get_table_names() == ["alembic_version"]

    sqlite_db.upgrade()
    assert schema_differences(sqlite_db) == []


def test_sqlite_foreign_keys_are_back_on_after_migrating(sqlite_db: Database) -> None:
    """env.py turns them off while migrating, so batch table copies do not cascade deletes."""
    sqlite_db.upgrade()

    with sqlite_db.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def bare_config(url: str) -> Config:
    """An Alembic config with a URL and no engine, as a command line would build it."""
    config = Config(output_buffer=io.StringIO())
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url)
    return config


def test_upgrade_from_a_bare_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bare.db'}"
    command.upgrade(bare_config(url), "head")

    db = Database(url)
    try:
        assert schema_differences(db) == []
    finally:
        db.dispose()


def test_offline_mode_renders_postgres_sql_from_a_bare_url() -> None:
    config = bare_config("postgres://nobody@nowhere/none")

    command.upgrade(config, "head", sql=True)

    assert isinstance(config.output_buffer, io.StringIO)
    sql = config.output_buffer.getvalue()
    assert "CREATE TABLE outbox (\n    id BIGSERIAL NOT NULL" in sql
    assert "data JSONB NOT NULL" in sql
    assert "at TIMESTAMP WITH TIME ZONE NOT NULL" in sql
    assert "INSERT INTO alembic_version (version_num) VALUES ('0001')" in sql


@pytest.fixture(params=["sqlite", "postgres"])
def migrated(request: pytest.FixtureRequest) -> Database:
    db: Database = request.getfixturevalue(f"{request.param}_db")
    db.upgrade()
    return db


ALICE = Principal(authenticator="slack", issuer="T1", principal_type="user", principal_id="U1",
                  attributes={"userName": "alice"})
BOB = api_key_principal("bob")


def stored_initiators(db: Database) -> dict[str, Any]:
    """What the column holds, as JSON, without the principal type reading it."""
    with db.read() as session:
        return {id_: raw for id_, raw in session.execute(select(SessionRow.id, type_coerce(SessionRow.initiator,
                                                                                            JSONType)))}


def loaded_initiators(db: Database) -> dict[str, Any]:
    with db.read() as session:
        return {row.id: row.initiator for row in session.scalars(select(SessionRow))}


def test_a_principal_is_stored_without_its_keys_and_reads_back_whole(migrated: Database) -> None:
    with migrated.write() as session:
        session.add_all([SessionRow(id="ses_a", agent="a", channel="api", address="a", initiator=ALICE.wire()),
                         SessionRow(id="ses_b", agent="a", channel="api", address="b", initiator=BOB.wire())])

    assert stored_initiators(migrated) == {"ses_a": ["slack", "T1", "user", "U1", {"userName": "alice"}],
                                           "ses_b": ["api-key", "hitl", "user", "bob"]}
    assert loaded_initiators(migrated) == {"ses_a": ALICE.wire(), "ses_b": BOB.wire()}


def test_a_principal_stored_as_an_object_reads_as_it_was(migrated: Database) -> None:
    """Rows written before principals were stored as arrays."""
    with migrated.write() as session:
        session.add(SessionRow(id="ses_a", agent="a", channel="api", address="a"))
        session.flush()
        session.execute(update(SessionRow).values(initiator=type_coerce(ALICE.wire(), JSONType)))

    assert stored_initiators(migrated) == {"ses_a": ALICE.wire()}
    assert loaded_initiators(migrated) == {"ses_a": ALICE.wire()}


DIGEST = hashlib.sha256(b"payload").hexdigest()


def test_ids_are_packed_on_postgres_and_unpacked_by_a_downgrade(postgres_db: Database) -> None:
    """Rows written before 0005 keep their ids (ours packed to 17 bytes, any other string kept whole), their
    digests (packed to their 32 bytes) and their addresses (a REST API session's stored as "")."""
    config = postgres_db.alembic_config()
    command.upgrade(config, "0004")
    session_id, turn_id, run_id = new_id("ses"), new_id("turn"), new_id("run")
    ids = {"sessions": session_id, "turns": turn_id, "runs": run_id, "input_requests": f"limit-{turn_id}-3"}
    with postgres_db.engine.begin() as conn:
        conn.execute(text("INSERT INTO sessions (id, agent, channel, address, status, event_seq, message_seq, "
                          "delivered_seq, delivery_queued, created_at, updated_at) VALUES (:s, 'a', 'api', :a, "
                          "'idle', 0, 0, 0, false, now(), now())"), {"s": session_id, "a": f"api:{session_id}:"})
        conn.execute(text("INSERT INTO turns (id, session_id, seq, status, input, steps, created_at, updated_at) "
                          "VALUES (:t, :s, 1, 'waiting', 'go', 1, now(), now())"), {"t": turn_id, "s": session_id})
        conn.execute(text("INSERT INTO runs (id, turn_id, seq, status, started_at) VALUES (:r, :t, 1, "
                          "'interrupted', now())"), {"r": run_id, "t": turn_id})
        conn.execute(text("INSERT INTO input_requests (request_id, session_id, turn_id, run_id, position, kind, "
                          "prompt, options, allow_freeform, display, status, seq, created_at) VALUES (:q, :s, :t, "
                          ":r, 0, 'session-limit', 'Continue?', '[]', false, 'confirmation', 'pending', 1, now())"),
                     {"q": ids["input_requests"], "s": session_id, "t": turn_id, "r": run_id})
        conn.execute(text("INSERT INTO inbound (channel, external_id, received_at, payload_digest, duplicates) "
                          "VALUES ('slack', 'e1', now(), :d, 0)"), {"d": DIGEST})

    command.upgrade(config, "head")

    with postgres_db.engine.connect() as conn:
        stored = {t: conn.scalar(text(f"SELECT {'request_id' if t == 'input_requests' else 'id'} FROM {t}"))
                  for t in ids}
    assert stored == {t: pack_id(i) for t, i in ids.items()}
    assert len(stored["turns"]) == 17
    with postgres_db.engine.connect() as conn:
        assert conn.scalar(text("SELECT payload_digest FROM inbound")) == bytes.fromhex(DIGEST)
        assert conn.scalar(text("SELECT hitl_unpack_id(id) FROM turns WHERE id = hitl_pack_id(:t)"),
                           {"t": turn_id}) == turn_id  # for SQL by hand
    with postgres_db.read() as session:
        assert session.scalars(select(Inbound.payload_digest)).one() == DIGEST
    with postgres_db.read() as session:
        request = session.scalars(select(InputRequest)).one()
        assert (request.request_id, request.session_id, request.turn_id, request.run_id) == (
            ids["input_requests"], session_id, turn_id, run_id)
        opened = session.get_one(SessionRow, session_id)
        assert (opened.stored_address, opened.address) == ("", f"api:{session_id}:")

    command.downgrade(config, "0004")

    with postgres_db.engine.connect() as conn:
        assert conn.execute(text("SELECT request_id, session_id, turn_id, run_id FROM input_requests")).one() == (
            ids["input_requests"], session_id, turn_id, run_id)
        assert conn.scalar(text("SELECT payload_digest FROM inbound")) == DIGEST
        assert conn.scalar(text("SELECT address FROM sessions")) == f"api:{session_id}:"
        assert conn.scalar(text("SELECT count(*) FROM pg_proc WHERE proname LIKE 'hitl%' AND pronamespace = "
                                "current_schema()::regnamespace")) == 0


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_0008_gives_earlier_rows_the_digests_of_their_principals(request: pytest.FixtureRequest, kind: str) -> None:
    """Sessions and candidates written before 0008 (principals as arrays or, before 0005, objects) get the same
    digest the code gives new rows, so a key's earlier sessions and requests stay its own; and, from 0014, the
    principal id beside it, so they stay its person's too."""
    db: Database = request.getfixturevalue(f"{kind}_db")
    config = db.alembic_config()
    command.upgrade(config, "0004")  # ids not yet packed on PostgreSQL: plain SQL can write them
    carol = api_key_principal("carol", "agent")
    principals = {"ses_a": ALICE.wire(), "ses_b": BOB.wire(), "ses_c": None}
    stored = {"ses_a": [*ALICE.wire().values()][:4] + [ALICE.attributes], "ses_b": BOB.wire(), "ses_c": None}
    json_ = "CAST(:p AS JSONB)" if kind == "postgres" else ":p"
    with db.engine.begin() as conn:
        for session_id, principal in stored.items():
            conn.execute(text("INSERT INTO sessions (id, agent, channel, address, initiator, status, event_seq, "
                              f"message_seq, delivered_seq, delivery_queued, created_at, updated_at) VALUES (:s, 'a', "
                              f"'api', :s, {json_}, 'idle', 0, 0, 0, false, :now, :now)"),
                         {"s": session_id, "p": None if principal is None else json.dumps(principal),
                          "now": datetime.now(UTC)})
        conn.execute(text("INSERT INTO turns (id, session_id, seq, status, input, steps, created_at, updated_at) "
                          "VALUES ('turn_1', 'ses_a', 1, 'waiting', 'go', 1, :now, :now)"), {"now": datetime.now(UTC)})
        conn.execute(text("INSERT INTO runs (id, turn_id, seq, status, started_at) VALUES ('run_1', 'turn_1', 1, "
                          "'interrupted', :now)"), {"now": datetime.now(UTC)})
        conn.execute(text("INSERT INTO input_requests (request_id, session_id, turn_id, run_id, position, kind, "
                          "prompt, options, allow_freeform, display, status, seq, created_at) VALUES ('req_1', "
                          "'ses_a', 'turn_1', 'run_1', 0, 'question', 'Why?', '[]', false, 'text', 'pending', 1, "
                          ":now)"),
                     {"now": datetime.now(UTC)})
        conn.execute(text("INSERT INTO response_candidates (candidate_id, request_id, responder, outcome, created_at) "
                          f"VALUES ('cand_1', 'req_1', {json_}, 'rejected', :now)"),
                     {"p": json.dumps([*carol.wire().values()][:4]), "now": datetime.now(UTC)})

    command.upgrade(config, "head")

    with db.read() as session:
        digests = dict(session.execute(select(SessionRow.id, SessionRow.initiator_digest)).all())
        responder = session.scalars(select(ResponseCandidate.responder_digest)).one()
    assert digests == {session_id: principal_digest(principal) for session_id, principal in principals.items()}
    assert digests["ses_a"] is not None and responder == principal_digest(carol.wire())
    with db.read() as session:  # and 0014 their principal ids, by which a person's principals are found
        ids = dict(session.execute(select(SessionRow.id, SessionRow.initiator_id)).all())
        responder_id = session.scalars(select(ResponseCandidate.responder_id)).one()
    assert ids == {"ses_a": "U1", "ses_b": "bob", "ses_c": None} and responder_id == "carol"


def test_0009_a_downgrade_deletes_external_requests_and_keeps_the_agents(migrated: Database) -> None:
    """External requests have no turn: a schema before 0009 cannot hold them, so going back deletes them (with
    their candidates); an agent's request stays, and upgrading again gives the same schema."""
    now = datetime.now(UTC)
    request = {"session_id": "ses_a", "kind": "question", "prompt": "?", "options": [], "display": "text", "seq": 1,
               "created_at": now}
    with migrated.write() as session:
        for row in (SessionRow(id="ses_a", agent="a", channel="api", address="", initiator=BOB.wire()),
                    Turn(id="turn_a", session_id="ses_a", seq=1, input="go"),
                    Run(id="run_a", turn_id="turn_a", seq=1, status="interrupted")):
            session.add(row)
            session.flush()  # (no relationships: the unit of work does not order these by their keys)
        session.add_all([InputRequest(request_id="req_agent", turn_id="turn_a", run_id="run_a", **request),
                         InputRequest(request_id="req_external", **{**request, "seq": 2})])
        session.flush()
        session.add_all([ExternalRequest(request_id="req_external", requester_digest=DIGEST, body_digest=DIGEST,
                                         idempotency_key="k"),
                         RequestApprover(request_id="req_external", principal_id="alice"),
                         ResponseCandidate(request_id="req_external", responder=BOB.wire())])

    command.downgrade(migrated.alembic_config(), "0008")

    with migrated.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM input_requests")).scalar() == 1
        assert conn.execute(text("SELECT count(*) FROM response_candidates")).scalar() == 0
        assert "external_requests" not in inspect(conn).get_table_names()
    migrated.upgrade()
    assert schema_differences(migrated) == []
    with migrated.read() as session:
        assert session.scalars(select(InputRequest.request_id)).all() == ["req_agent"]
