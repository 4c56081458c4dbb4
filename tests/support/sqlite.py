"""SQLite files for test stacks, migrated once per test process."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

from sqlalchemy.engine import make_url

from engine.store.db import Database


@functools.cache
def migrated_sqlite() -> bytes:
    """The file of a SQLite database migrated to head, made once per test process."""
    with tempfile.TemporaryDirectory() as folder:
        db = Database(f"sqlite:///{folder}/hitl.db")
        db.upgrade()
        db.dispose()
        return (Path(folder) / "hitl.db").read_bytes()


def seed_sqlite(url: str) -> None:
    """A SQLite stack whose file does not exist yet starts from a copy of `migrated_sqlite()`: running every
    migration costs a tenth of a second or more per test, the copy next to nothing (the app's own upgrade finds
    the copy at head). A file that exists (a test's older revision, say) is left as it is."""
    if make_url(url).get_backend_name() == "sqlite":
        path = Path(make_url(url).database or "")
        if not path.exists():
            path.write_bytes(migrated_sqlite())
