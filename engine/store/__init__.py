"""Store: tables, statuses, column storage, the database, the transaction object (tx), events, read models,
visibility, retention."""
