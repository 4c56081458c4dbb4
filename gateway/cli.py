"""The `hitl` command: serve, worker, slack-socket, db upgrade, sweep, requests, answer, sessions, show, resume."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from redis.exceptions import RedisError
from sqlalchemy.exc import OperationalError
from werkzeug.serving import WSGIRequestHandler

from engine.errors import EngineError
from engine.executors import InlineExecutor
from engine.operator import resume_turn
from engine.protocol import InputResponse, operator_principal
from engine.queries import list_requests, list_sessions, session_history
from engine.recovery import Sweeper, sweep
from engine.responses import submit_responses
from engine.runtime import Runtime

from .compose import build_runtime
from .schemas import MAX_PAGE, PAGE, page_limit
from .settings import ConfigurationError, load_settings
from .stream import redact_access_token

log = logging.getLogger("hitl")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="hitl", description="hitl-gateway: agent turns that wait for people")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the gateway (embedded defaults: SQLite, in-process jobs)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.set_defaults(handler=cmd_serve)

    commands.add_parser("worker", help="run an RQ worker (needs REDIS_URL); sweeps every HITL_SWEEP_SECONDS") \
        .set_defaults(handler=cmd_worker)

    commands.add_parser("slack-socket", help="take Slack's events over Socket Mode (SLACK_APP_TOKEN): no public URL") \
        .set_defaults(handler=cmd_slack_socket)

    db = commands.add_parser("db", help="database schema")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    db_commands.add_parser("upgrade", help="apply migrations up to head").set_defaults(handler=cmd_db_upgrade)

    commands.add_parser("sweep", help="recover lost turns and re-enqueue lost jobs, once") \
        .set_defaults(handler=cmd_sweep)

    requests = commands.add_parser("requests", help="list input requests, oldest first")
    requests.add_argument("--status", choices=["pending", "resolved"], default=None)
    requests.add_argument("--session", default=None)
    requests.add_argument("--limit", type=count, default=PAGE, help=f"at most this many (0 to {MAX_PAGE})")
    requests.add_argument("--after", default=None, help="the next page: the request id the page before ended with")
    requests.add_argument("--json", action="store_true", help="print the page as the API answers it, {requests, next}")
    requests.set_defaults(handler=cmd_requests)

    answer = commands.add_parser("answer", help="answer a request as an operator")
    answer.add_argument("request_id")
    answer.add_argument("choice", nargs="?", help="approve, deny, or an option id")
    answer.add_argument("--text", help="a free-text answer to a question")
    answer.add_argument("--note", help="a note carried with deny")
    answer.add_argument("--as", dest="operator", type=name, required=True,
                        help="the operator's name, for the audit trail")
    answer.set_defaults(handler=cmd_answer)
    add_operator_commands(commands)

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        args.handler(args)
    except (ConfigurationError, EngineError) as exc:
        sys.exit(f"hitl: {exc}")
    except OperationalError as exc:  # down, unreachable, refused us, or a SQLite file that cannot be opened
        sys.exit(f"hitl: the database of DATABASE_URL cannot be used: {str(exc.orig).strip().splitlines()[0]}")
    except RedisError as exc:  # hitl worker: down, unreachable, or refused us (its message names host and port only)
        sys.exit(f"hitl: the Redis of REDIS_URL cannot be used: {str(exc).strip().splitlines()[0]}")


def count(raw: str) -> int:
    """A number of rows, as the API takes it (a negative LIMIT is an error on PostgreSQL, none on SQLite)."""
    value = page_limit(raw)
    if value is None:
        raise argparse.ArgumentTypeError(f"an integer from 0 to {MAX_PAGE}, not {raw!r}")
    return value


def name(raw: str) -> str:
    """An operator's name, trimmed: the audit trail says who answered, so it is never blank."""
    if not raw.strip():
        raise argparse.ArgumentTypeError("a name is required (who answers, for the audit trail)")
    return raw.strip()


def add_operator_commands(commands: Any) -> None:
    sessions = commands.add_parser("sessions", help="list sessions, newest first, with their open requests")
    sessions.add_argument("--limit", type=count, default=PAGE, help=f"at most this many (0 to {MAX_PAGE})")
    sessions.add_argument("--before", default=None, help="the next page: the session id the page before ended with")
    sessions.set_defaults(handler=cmd_sessions)

    show = commands.add_parser("show", help="a session's history (its latest turns): runs, requests, responses")
    show.add_argument("session_id")
    show.add_argument("--before", default=None, help="the earlier turns: the turn id the page after began with")
    show.add_argument("--json", action="store_true", help="print the history document as JSON")
    show.set_defaults(handler=cmd_show)

    resume = commands.add_parser("resume", help="re-enqueue a stuck turn (waiting with nothing open, or queued)")
    resume.add_argument("turn_id")
    resume.set_defaults(handler=cmd_resume)


def runtime() -> Runtime:
    return build_runtime(load_settings())


def finish_jobs(rt: Runtime) -> None:
    """Embedded mode: let the jobs this command started (a resumed turn) run before the process exits."""
    join = getattr(rt.executor, "join", None)
    if join is not None:
        join()


class ServeRequestHandler(WSGIRequestHandler):
    """Werkzeug's, logging each request line with an event stream's `?access_token=` key hidden."""

    def log(self, type: str, message: str, *args: Any) -> None:
        super().log(type, message, *(redact_access_token(arg) if isinstance(arg, str) else arg for arg in args))


def cmd_serve(args: argparse.Namespace) -> None:
    from .app import create_app

    app = create_app()
    print(f"hitl-gateway serving http://{args.host}:{args.port}", flush=True)
    app.run(host=args.host, port=args.port, threaded=True, use_reloader=False, request_handler=ServeRequestHandler)


def cmd_worker(args: argparse.Namespace) -> None:
    from rq import Queue

    from .rqworker import WORKER_CLASSES

    settings = load_settings()
    if not settings.redis_url:
        raise ConfigurationError("hitl worker needs REDIS_URL")
    rt = build_runtime(settings)
    import psycopg  # noqa: F401  (preloaded so forked work horses do not import it per job)

    import engine.jobs  # noqa: F401

    Sweeper(rt, settings.sweep_seconds).start()
    executor = rt.executor
    worker_class = WORKER_CLASSES[settings.worker_class]
    connection = executor.redis  # type: ignore[attr-defined]
    worker = worker_class([Queue(settings.queue, connection=connection)], connection=connection)
    worker.work(with_scheduler=True)


def cmd_slack_socket(args: argparse.Namespace) -> None:
    from .app import create_app
    from .slack import socket_mode_handler

    socket_mode_handler(create_app()).start()


def join_inline(rt: Runtime) -> None:
    """Embedded mode: let the jobs this command queued run before the process exits."""
    if isinstance(rt.executor, InlineExecutor):
        rt.executor.join()


def cmd_db_upgrade(args: argparse.Namespace) -> None:
    settings = load_settings()
    from engine.db import Database

    db = Database(settings.database_url)
    newer = db.newer_revision()
    if newer is not None:  # a rollback's release: the processes of this version use it as it is
        print(f"database is at revision {newer}, of a newer version than this one: left as it is")
        return
    db.upgrade()
    print("database is at the latest revision")


def cmd_sweep(args: argparse.Namespace) -> None:
    rt = runtime()
    print(json.dumps(sweep(rt).__dict__))
    join_inline(rt)


def cmd_requests(args: argparse.Namespace) -> None:
    page = list_requests(runtime(), status=args.status, session_id=args.session, limit=args.limit, after=args.after)
    if args.json:
        print(json.dumps(page, indent=2))
        return
    print(f"{'REQUEST':38} {'KIND':14} {'STATUS':9} {'OUTCOME':9} {'CREATED':20} PROMPT")
    for r in page["requests"]:
        created = r["createdAt"][:19].replace("T", " ")
        print(f"{r['requestId']:38} {r['kind']:14} {r['status']:9} {r['outcome'] or '-':9} {created:20} {r['prompt']}")
    if page["next"]:
        print(f"more: add --after {page['next']}", file=sys.stderr)


def cmd_answer(args: argparse.Namespace) -> None:
    if (args.choice is None) == (args.text is None):
        raise ConfigurationError("give exactly one of an option (approve, deny, ...) or --text")
    response = InputResponse(request_id=args.request_id, option_id=args.choice, text=args.text or args.note)
    rt = runtime()
    [result] = submit_responses(rt, operator_principal(args.operator), [response])
    print(json.dumps(result.wire(), indent=2))
    finish_jobs(rt)
    if result.status in ("refused", "stale"):
        sys.exit(1)


def timestamp(iso: str | None) -> str:
    return iso[:19].replace("T", " ") if iso else "-"


def who(principal: dict[str, Any] | None) -> str:
    return f"{principal['principalId']} ({principal['authenticator']})" if principal else "-"


def cmd_sessions(args: argparse.Namespace) -> None:
    page = list_sessions(runtime(), limit=args.limit, before=args.before)
    print(f"{'SESSION':38} {'STATUS':8} {'CHANNEL':10} {'PENDING':7} CREATED")
    for s in page["sessions"]:
        print(f"{s['id']:38} {s['status']:8} {s['channel']:10} {s['pendingRequests']:<7} {timestamp(s['createdAt'])}")
    if page["next"]:
        print(f"more: add --before {page['next']}", file=sys.stderr)


def cmd_show(args: argparse.Namespace) -> None:
    history = session_history(runtime(), args.session_id, before=args.before)
    if args.json:
        print(json.dumps(history, indent=2))
        return
    print(f"session {history['id']}  {history['status']}  agent {history['agent']}  channel {history['channel']}  "
          f"started {timestamp(history['createdAt'])} by {who(history['initiator'])}")
    for turn in history["turns"]:
        print_turn(turn)
    if history["requests"]:
        print("\nrequests of agents elsewhere (no turn)")
        print_requests(history["requests"])
    if history["next"]:
        print(f"earlier turns: add --before {history['next']}", file=sys.stderr)


def print_requests(requests: list[dict[str, Any]]) -> None:
    for request in requests:
        outcome = f"{request['outcome']} by {who(request['responder'])}" if request["outcome"] else "open"
        print(f"  request {request['requestId']} {request['kind']}: {request['prompt']}  [{outcome}]")
        for c in request["candidates"]:
            said = " ".join(filter(None, [c["decision"], c["text"]])) or "-"
            reason = f" ({c['reason']})" if c["reason"] else ""
            print(f"    response from {who(c['responder'])}: {said} -> {c['outcome']}{reason}")


def print_turn(turn: dict[str, Any]) -> None:
    print(f"\nturn {turn['seq']} {turn['id']}  {turn['status']}  by {who(turn['requestedBy'])}")
    print(f"  input: {turn['input']}")
    for run in turn["runs"]:
        print(f"  run {run['seq']} {run['status']:11} {timestamp(run['startedAt'])} -> {timestamp(run['endedAt'])}")
    print_requests(turn["requests"])
    for call in turn["toolCalls"]:
        print(f"  call {call['toolName']} {json.dumps(call['input'])} -> {call['status']}")
    if turn["result"] is not None:
        print(f"  result: {turn['result']}")
    if turn["error"]:
        print(f"  error: {turn['error'].get('message', turn['error'])}")


def cmd_resume(args: argparse.Namespace) -> None:
    rt = runtime()
    print(f"turn {args.turn_id} {resume_turn(rt, args.turn_id)}")
    finish_jobs(rt)
