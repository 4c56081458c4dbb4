"""Engine constants, flat and boring."""

from datetime import UTC, datetime

LEASE_SECONDS = 30
"""How long a runner owns a turn without renewing its lease."""

SWEEP_OUTBOX_AFTER_SECONDS = 30
"""An outbox row whose job has not started this long after its push is pushed again by sweep()."""

SWEEP_QUEUED_TURN_AFTER_SECONDS = 30
"""A queued turn untouched for this long is enqueued again by sweep()."""

HANDED_OVER_AT = datetime(1970, 1, 1, tzinfo=UTC)
"""The `available_at` of an outbox row handed over by a process that runs no job (the CLI): due before any other,
it is what the serving process's hand-over poll looks for (and a sweep pushes it as any row due)."""

HAND_OVER_POLL_SECONDS = 1.0
"""How often the embedded server looks for outbox rows handed over to it (one indexed query that finds none,
usually)."""

HAND_OVER_WAIT_SECONDS = 5.0
"""How long the CLI waits for a serving process to take the turn it handed over before it says none did."""

SWEEP_SETTLED_EVERY_SECONDS = 3600.0
"""How often a Sweeper looks for waiting turns whose requests are all closed (and on its first sweep).
Every close resumes its turn in the same transaction, so only a turn left so by a crash of an older
version, or by an edit by hand, is found; the query reads every waiting turn."""

REQUEST_POLICY_TIMEOUT_SECONDS = 30.0
"""An async request policy slower than this leaves its call to a person (as a failing one does)."""

RESPONSE_POLICY_TIMEOUT_SECONDS = 10.0
"""An async response policy slower than this leaves its candidate `timed-out`."""

SWEEP_CANDIDATE_AFTER_SECONDS = 60
"""A candidate still unjudged this long past the response policy timeout was left by a process that died
while its policy ran (a sync policy has no timeout: one slower than this is overtaken, harmlessly): sweep()
judges it again."""

CONNECT_TIMEOUT_SECONDS = 10
"""How long a new PostgreSQL connection may take (libpq waits for a host that drops packets until TCP gives up,
minutes, holding a request, a job or /healthz that long), unless DATABASE_URL sets `connect_timeout` itself."""

PING_IDLE_CONNECTION_AFTER_SECONDS = 5.0
"""A pooled PostgreSQL connection idle this long is pinged before use (one used more recently is not)."""

RETENTION_DAYS = 30
"""How long inbound rows with nothing left to do are kept (for deduplication and audit) before sweep() prunes
them: far longer than any platform retries or redelivers a webhook (Slack: minutes; GitHub: 3 days)."""

PRUNE_BATCH = 1000
"""At most this many inbound rows pruned by one sweep: one sweep stays short however many rows are due (at
a sweep every 10 s, 100 rows a second)."""

HISTORY_TURNS = 100
"""Turns per page of a session's history (the latest first; `before` for earlier ones)."""

INLINE_WORKERS = 4
"""Threads of the in-process executor."""

QUEUE_NAME = "hitl"

JOB_TIMEOUT_SECONDS = 180
"""How long a job may run on a worker (RQ's own default): a turn's run with its tools, or a delivery. RQ stops a
job past it (a tool then fails with the timeout); HITL_JOB_TIMEOUT sets it for tools that take longer."""

JOB_RESULT_TTL_SECONDS = 60
"""How long RQ keeps a finished job (its result is always None). Deleting it at once costs RQ 3 about
0.5 ms of CPU and 0.8 ms of wall time more per job (measured: 2.8 against 2.2-2.3 ms for a no-op job on
SimpleWorker) than letting it expire, and a minute of finished jobs is a few MB of Redis at 100 jobs/s."""

JOB_FAILURE_TTL_SECONDS = 7 * 24 * 3600
"""How long RQ keeps a job that failed all its retries, for an operator to look at."""

APP_PRINCIPAL_ID = "app"

CALLBACK_TIMEOUT_SECONDS = 10.0
"""How long a callback's receiver may take to answer one attempt."""

CALLBACK_LEASE_SECONDS = 60
"""An attempt under way for this long is presumed lost (its worker died): sweep() sends the callback again."""

CALLBACK_BACKOFF_SECONDS = (5, 30, 120, 600, 1800, 3600, 7200, 14400, 28800)
"""The wait after each failed attempt of a callback (the last one repeats)."""

CALLBACK_RETRY_HOURS = 24
"""A callback is retried until this long after its request closed, then `failed`."""

REMIND_MAX = 3
"""How many reminders a request gets when its `remind_every` comes without `remind_max`."""

PLACE_TITLE_LENGTH = 40
"""A request shown away from its session names the session's title after its prompt, cut to this many characters
(with `...`, which every SMS alphabet has)."""

GROUP_MEMBERS_TTL_SECONDS = 300.0
"""How long the members of a platform group (a Slack user group, a GitHub team) are kept before they are looked up
again: at most five minutes, so someone removed from the group loses their say within that."""

RIDE_AFTER_SECONDS = 0.2
"""How long a job's slow work (a tool, a model call) goes on before the deliveries the job collected run beside it
(engine/jobs/outbox.py `riding`): a quick tool's turn is delivered at once with its card's update, a slow one's
card is updated while it runs."""
