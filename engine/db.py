"""Database access: engine set-up for SQLite and PostgreSQL, transactions, migrations."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Executable, create_engine, event
from sqlalchemy.engine import Connection, CursorResult, Engine
from sqlalchemy.orm import Session, sessionmaker

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
    timeout instead of failing on a stale read snapshot; reads use a plain deferred BEGIN.
    """

    def __init__(self, url: str) -> None:
        self.url = normalize_url(url)
        self.is_sqlite = self.url.startswith("sqlite")
        kwargs: dict[str, Any] = {"pool_pre_ping": not self.is_sqlite}
        if self.is_sqlite:
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        self.engine: Engine = create_engine(self.url, **kwargs)
        if self.is_sqlite:
            _configure_sqlite(self.engine)
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
        """Run the Alembic migrations up to `revision`."""
        from alembic import command

        command.upgrade(self.alembic_config(), revision)

    def alembic_config(self) -> Any:
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.attributes["engine"] = self.engine
        return config

    def dispose(self) -> None:
        self.engine.dispose()


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


def changed(session: Session, statement: Executable) -> int:
    """Run an UPDATE and return how many rows it changed (the compare-and-set check)."""
    return cast(CursorResult[Any], session.execute(statement)).rowcount
