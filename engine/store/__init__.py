"""Store: tables, column storage, the database, events, read models, visibility, retention."""
