"""Engine constants, flat and boring."""

LEASE_SECONDS = 30
"""How long a runner owns a turn without renewing its lease."""

SWEEP_OUTBOX_AFTER_SECONDS = 30
"""An outbox row whose job has not started this long after its push is pushed again by sweep()."""

SWEEP_QUEUED_TURN_AFTER_SECONDS = 30
"""A queued turn untouched for this long is enqueued again by sweep()."""

SWEEP_SETTLED_EVERY_SECONDS = 3600.0
"""How often a Sweeper looks for waiting turns whose requests are all closed (and on its first sweep).
Every close resumes its turn in the same transaction, so only a turn left so by a crash of an older
version, or by an edit by hand, is found; the query reads every waiting turn."""

RESPONSE_POLICY_TIMEOUT_SECONDS = 10.0
"""An async response policy slower than this leaves its candidate `timed-out`."""

PING_IDLE_CONNECTION_AFTER_SECONDS = 5.0
"""A pooled PostgreSQL connection idle this long is pinged before use (one used more recently is not)."""

INLINE_WORKERS = 4
"""Threads of the in-process executor."""

QUEUE_NAME = "hitl"

APP_PRINCIPAL_ID = "app"
