"""Store: tables, statuses, column storage, the database, events, read models, visibility, retention."""
