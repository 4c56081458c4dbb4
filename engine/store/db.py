"""Database access: engine set-up for SQLite and PostgreSQL, transactions, migrations."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Executable, Table, Update, bindparam, create_engine, event, inspect, update
from sqlalchemy.engine import Connection, CursorResult, Engine, make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

from engine import defaults

MIGRATIONS = Path(__file__).with_name("migrations")


def normalize_url(url: str) -> str:
    """Accept the `postgres://` URLs that hosting platforms hand out; always use psycopg 3."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


class Database:
    """One SQLAlchemy engine and its session factory.

    On SQLite every write transaction starts with BEGIN IMMEDIATE, so two writers queue on the busy
    timeout instead of failing on a stale read snapshot; reads use a plain deferred BEGIN. On PostgreSQL a
    pooled connection that sat idle is pinged before use (see `_ping_when_idle`).
    """

    def __init__(self, url: str, *, ping_after_idle: float = defaults.PING_IDLE_CONNECTION_AFTER_SECONDS) -> None:
        self.url = normalize_url(url)
        self.is_sqlite = self.url.startswith("sqlite")
        kwargs: dict[str, Any] = {}
        if self.is_sqlite:
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        elif "connect_timeout" not in make_url(self.url).query:  # libpq waits on an unanswering host for minutes
            kwargs["connect_args"] = {"connect_timeout": defaults.CONNECT_TIMEOUT_SECONDS}
        self.engine: Engine = create_engine(self.url, **kwargs)
        # a flush's rows of one table go out as one multi-row INSERT, not as an executemany (on psycopg, a
        # pipeline with a sync per batch): a transaction's events are one statement
        self.engine.dialect.use_insertmanyvalues_wo_returning = True
        if self.is_sqlite:
            _configure_sqlite(self.engine)
        else:
            _ping_when_idle(self.engine, ping_after_idle)
        self._writer = sessionmaker(self.engine, expire_on_commit=False)
        self._reader = sessionmaker(
            self.engine.execution_options(hitl_readonly=True), expire_on_commit=False
        )
        os.register_at_fork(after_in_child=self.after_fork)

    def after_fork(self) -> None:
        """A forked RQ work horse must not reuse the parent's pooled connections."""
        self.engine.dispose(close=False)

    @contextmanager
    def write(self) -> Iterator[Session]:
        with self._writer() as session, session.begin():
            yield session

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._reader() as session, session.begin():
            yield session

    def upgrade(self, revision: str = "head") -> None:
        """Run the Alembic migrations up to `revision`; a database past this code (`newer_revision()`) is left
        as it is, as its processes use it."""
        from alembic import command

        if self.newer_revision() is None:
            command.upgrade(self.alembic_config(), revision)

    def missing_migrations(self) -> list[str]:
        """The migrations of this code the database has not run, newest first: empty when it is at this
        code's head, or past it (a migration of a newer version, as in a rollback)."""
        if self.newer_revision() is not None:
            return []
        script = self._script()
        current = self._current_revision()
        return [migration.revision for migration in script.iterate_revisions("heads", current or "base")]

    def newer_revision(self) -> str | None:
        """The database's revision when this code does not know it (a newer version migrated it, and this one
        is a rollback), else None."""
        from alembic.script.revision import ResolutionError

        current = self._current_revision()
        if current is None:
            return None
        try:
            self._script().revision_map.get_revision(current)
        except ResolutionError:
            return current
        return None

    def _current_revision(self) -> str | None:
        from alembic.runtime.migration import MigrationContext

        with self.engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()

    def _script(self) -> Any:
        from alembic.script import ScriptDirectory

        return ScriptDirectory.from_config(self.alembic_config())

    def alembic_config(self) -> Any:
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.attributes["engine"] = self.engine
        return config

    def dispose(self) -> None:
        self.engine.dispose()


def lost_connection(exc: BaseException) -> bool:
    """Whether `exc` is a database connection going away (a restart, a failover, a terminated backend), as
    SQLAlchemy tells it: not the fault of the work that was using it, which a new connection can take up."""
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


def _ping_when_idle(engine: Engine, idle_seconds: float) -> None:
    """Ping a pooled connection before use only when it sat in the pool `idle_seconds` or more.

    `pool_pre_ping` pings on every checkout: one more round trip per transaction, about a tenth of a
    park/resume cycle. A connection handed back moments ago is alive unless the server restarted in
    between; that rare case fails one transaction, SQLAlchemy then recycles every older connection of the
    pool, and the caller's retry (RQ's, Slack's, the client's; a run hands its turn back) finds fresh ones.
    """

    @event.listens_for(engine, "checkin")
    def _checkin(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info["checked_in_at"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_connection: Any, record: ConnectionPoolEntry, _proxy: PoolProxiedConnection) -> None:
        checked_in_at = record.info.get("checked_in_at")
        if checked_in_at is None or time.monotonic() - checked_in_at < idle_seconds:
            return  # new, or back in the pool only just now
        try:
            engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as exc:
            raise DisconnectionError(f"a pooled connection is gone: {exc}") from exc  # the pool reconnects


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself, below
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        readonly = connection.get_execution_options().get("hitl_readonly")
        connection.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")


def changed(session: Session | Connection, statement: Executable, params: dict[str, Any] | None = None) -> int:
    """Run an UPDATE (with `params`, for one built once) and return how many rows it changed (the
    compare-and-set check). On a Session's `connection()`, an UPDATE of mapped rows skips the ORM's work: no
    autoflush first, and no loaded object of the transaction updated in memory (for rows the transaction has
    not loaded)."""
    return cast(CursorResult[Any], session.execute(statement, params)).rowcount


_WRITES: dict[type, tuple[Update, dict[str, str]]] = {}
"""A mapped class -> the UPDATE of one row of its table by primary key, built on first use (see turns/transitions.py on
statements built once; it sets the columns its parameters name), and its attributes' column keys."""


def write_row(db: Session, row: Any, **values: Any) -> None:
    """Set `values` (by attribute name) on a mapped object. A loaded row with no change of its own waiting for
    a flush gets them by one UPDATE on its table at once, which costs about half of taking it through the unit
    of work (0.15 against 0.3 ms of CPU for one column, measured alone); a new row, or one with a change
    waiting, gets them with that change, in one statement at the next flush."""
    state = inspect(row)
    if not state.persistent or state.modified:
        for key, value in values.items():
            setattr(row, key, value)
        return
    built = _WRITES.get(type(row))
    if built is None:
        table = cast(Table, state.mapper.local_table)
        (primary,) = table.primary_key.columns
        columns = {attribute.key: attribute.columns[0].key for attribute in state.mapper.column_attrs}
        built = _WRITES[type(row)] = (update(table).where(primary == bindparam("row_key")), columns)
    statement, columns = built
    db.connection().execute(statement, {"row_key": state.identity[0],
                                        **{columns[key]: value for key, value in values.items()}})
    for key, value in values.items():
        set_committed_value(row, key, value)
