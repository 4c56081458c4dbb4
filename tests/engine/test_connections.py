"""Pooled PostgreSQL connections: pinged before use only after sitting idle, replaced when found dead."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from engine.store.db import Database


class Pinged(Database):
    """A Database that counts the pings its pool sends."""

    def __init__(self, url: str, ping_after_idle: float) -> None:
        super().__init__(url, ping_after_idle=ping_after_idle)
        self.pings = 0
        ping = self.engine.dialect.do_ping

        def counted(dbapi_connection: DBAPIConnection) -> bool:
            self.pings += 1
            return ping(dbapi_connection)

        self.engine.dialect.do_ping = counted  # type: ignore[method-assign]


@pytest.fixture
def database(postgres_url: str, request: pytest.FixtureRequest) -> Iterator[Pinged]:
    db = Pinged(postgres_url, ping_after_idle=request.param)
    yield db
    db.dispose()


def backend_pid(db: Database) -> int:
    with db.write() as session:
        return int(session.execute(text("SELECT pg_backend_pid()")).scalar_one())


def killed(db: Pinged, url: str) -> int:
    """Use a pooled connection, then kill its backend from outside the pool (as a server restart or an idle
    timeout would); returns the dead backend's pid. The connection waits in the pool."""
    pid = backend_pid(db)
    other = create_engine(url, poolclass=NullPool)
    with other.begin() as conn:
        assert conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar_one()
    other.dispose()
    return pid


@pytest.mark.parametrize("database", [3600.0], indirect=True)
def test_a_connection_handed_back_just_now_is_used_without_a_ping(database: Pinged) -> None:
    first = backend_pid(database)
    assert [backend_pid(database) for _ in range(5)] == [first] * 5
    assert database.pings == 0


@pytest.mark.parametrize("database", [0.0], indirect=True)
def test_an_idle_connection_is_pinged_and_a_dead_one_replaced_before_the_transaction(
    database: Pinged, postgres_url: str,
) -> None:
    first = killed(database, postgres_url)

    second = backend_pid(database)  # no error: the ping found the connection dead and the pool reconnected

    assert second != first
    assert database.pings == 1


@pytest.mark.parametrize("database", [3600.0], indirect=True)
def test_a_connection_killed_within_the_idle_window_fails_one_transaction_then_the_pool_recovers(
    database: Pinged, postgres_url: str,
) -> None:
    first = killed(database, postgres_url)

    with pytest.raises(OperationalError):
        backend_pid(database)
    assert backend_pid(database) != first


@pytest.mark.parametrize(("query", "seconds"), [("", "10"), ("?connect_timeout=3", "3")])
def test_a_new_connection_gives_up_on_an_unanswering_host_unless_the_url_says_otherwise(
        postgres_url: str, query: str, seconds: str) -> None:
    db = Database(postgres_url + query)
    try:
        with db.engine.connect() as conn:
            parameters = conn.connection.dbapi_connection.info.get_parameters()  # psycopg's: what libpq was given
            assert parameters["connect_timeout"] == seconds
    finally:
        db.dispose()
