"""Alembic environment. `Database.alembic_config()` hands over its engine; there is no alembic.ini.

Without an engine in `config.attributes["engine"]`, `sqlalchemy.url` is used. Offline mode (`--sql`)
works too.
"""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import Connection, Engine, create_engine, pool

from engine.store.db import normalize_url
from engine.store.tables import Base

config = context.config
OPTIONS: dict[str, Any] = {
    "target_metadata": Base.metadata,
    "render_as_batch": True,  # SQLite alters tables by copying them
    "compare_type": True,
}


def given_engine() -> Engine | None:
    engine: Engine | None = config.attributes.get("engine")
    return engine


def configured_url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError('no config.attributes["engine"] and no sqlalchemy.url to migrate')
    return normalize_url(url)


def run_offline() -> None:
    engine = given_engine()
    url = engine.url if engine is not None else configured_url()
    context.configure(url=url, literal_binds=True, dialect_opts={"paramstyle": "named"}, **OPTIONS)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    engine = given_engine() or create_engine(configured_url(), poolclass=pool.NullPool)
    with engine.connect() as connection:
        restore = _foreign_keys_off(connection)
        try:
            context.configure(connection=connection, **OPTIONS)
            with context.begin_transaction():
                context.run_migrations()
        finally:
            if restore:
                _sqlite_pragma(connection, "PRAGMA foreign_keys=ON")


def _foreign_keys_off(connection: Connection) -> bool:
    """Batch mode drops and recreates SQLite tables; with foreign keys on, that DROP would cascade
    into child rows. Returns whether they were on. (The pragma is ignored inside a transaction, so it
    goes straight to the driver, outside SQLAlchemy's autobegin.)"""
    if connection.dialect.name != "sqlite":
        return False
    was_on = bool(_sqlite_pragma(connection, "PRAGMA foreign_keys"))
    _sqlite_pragma(connection, "PRAGMA foreign_keys=OFF")
    return was_on


def _sqlite_pragma(connection: Connection, sql: str) -> Any:
    cursor = connection.connection.cursor()
    try:
        cursor.execute(sql)
        row = cursor.fetchone()
        return row[0] if row else None
    finally:
        cursor.close()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
