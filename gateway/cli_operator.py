"""The operator's `hitl` commands: requests, answer, sessions, show, resume, sweep.

They read and change the deployment's database and never run a job themselves: a turn they resume runs in the
deployment's processes, with the session's agent (`HandOver`: the RQ queue with REDIS_URL, else the serving
process's hand-over poll). Where no process takes it, they say so and exit 1; what they changed stands.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, cast

from sqlalchemy import select
from sqlalchemy.engine import make_url

from engine import defaults
from engine.answers.submit import submit_responses
from engine.jobs.executors import HandOver
from engine.jobs.operator import resume_turn
from engine.jobs.recovery import sweep
from engine.jobs.runtime import Runtime
from engine.protocol import InputResponse, operator_principal
from engine.store.db import Database
from engine.store.queries import list_requests, list_sessions, session_history
from engine.store.statuses import RequestStatus
from engine.store.tables import InputRequest, Outbox, Session
from engine.turns.transitions import pending_requests

from .compose import build_runtime, open_database, queue
from .schemas import MAX_PAGE, PAGE, page_limit
from .settings import ConfigurationError, Settings, load_settings, shown_database

RESUMES_LATER = "what was done stands, and the turn resumes once `hitl serve` or `hitl worker` runs on this database"


def add_operator_commands(commands: Any) -> None:
    requests = commands.add_parser("requests", help="list input requests, oldest first")
    requests.add_argument("--status", choices=list(RequestStatus), default=None)
    requests.add_argument("--session", default=None)
    requests.add_argument("--limit", type=count, default=PAGE, help=f"at most this many (0 to {MAX_PAGE})")
    requests.add_argument("--after", default=None, help="the next page: the request id the page before ended with")
    requests.add_argument("--json", action="store_true", help="print the page as the API answers it, {requests, next}")
    requests.set_defaults(handler=cmd_requests)

    answer = commands.add_parser("answer", help="answer a request as an operator; the deployment resumes its turn")
    answer.add_argument("request_id")
    answer.add_argument("choice", nargs="?", help="approve, deny, or an option id")
    answer.add_argument("--text", help="a free-text answer to a question")
    answer.add_argument("--note", help="a note carried with deny")
    answer.add_argument("--as", dest="operator", type=name, default="local",
                        help="the operator's name, for the audit trail (default: local, as the console's)")
    answer.add_argument("--json", action="store_true", help="print the result as the API answers it")
    answer.set_defaults(handler=cmd_answer)

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

    commands.add_parser("sweep", help="recover lost turns and re-enqueue lost jobs, once") \
        .set_defaults(handler=cmd_sweep)


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


# -- the runtime of a command ------------------------------------------------------------------------------


def existing_database(settings: Settings) -> Database:
    """The deployment's database, which a command never creates: a SQLite file that is not there is an error
    saying where it was looked for and how to point at the gateway's."""
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:") \
            and not os.path.exists(url.database):
        raise ConfigurationError(
            f"no database at {shown_database(settings.database_url)}: run this where `hitl serve` runs, or point "
            "DATABASE_URL at the gateway's database (sqlite:////absolute/path/hitl.db, or its postgresql:// URL)")
    return open_database(settings, strict=True)


def operator_runtime(request_id: str | None = None) -> Runtime:
    """A runtime over the existing database whose jobs are handed over. With `request_id`: with the agent its
    session records (its tools' response policies judge the answer), where HITL_AGENT names another."""
    settings = load_settings()
    db = existing_database(settings)
    spec = session_agent(db, request_id) if request_id else None
    try:
        return build_runtime(settings, db=db, agent_spec=spec, executor=HandOver(queue(settings)))
    except ConfigurationError as exc:
        if spec is None:
            raise
        raise ConfigurationError(f"the session of request {request_id} runs {exc}; answer where the gateway runs "
                                 "(its directory, its PYTHONPATH), or from the console") from None


def session_agent(db: Database, request_id: str) -> str | None:
    """The `package.module:attribute` of the agent of the request's session; None when the request is not there
    (the answer says so) or its session predates sessions recording one (its agent's name only)."""
    with db.read() as session:
        agent = session.execute(select(Session.agent).join(InputRequest, InputRequest.session_id == Session.id)
                                .where(InputRequest.request_id == request_id)).scalar_one_or_none()
    return agent if agent is not None and ":" in agent else None


def not_handed_over(rt: Runtime) -> str | None:
    """None when every turn the command resumed is in the deployment's hands (the queue took it, or a serving
    process did within HAND_OVER_WAIT_SECONDS); else why not."""
    executor = cast(HandOver, rt.executor)  # (operator_runtime's)
    left = [(row_id, args[0]) for row_id, job, args in executor.left if job == "run_turn"]
    if not left:
        return None
    turns = ", ".join(turn_id for _, turn_id in left)
    if executor.queue is not None:
        return f"REDIS_URL's queue cannot take turn {turns} ({executor.queue_error})"
    deadline = time.monotonic() + defaults.HAND_OVER_WAIT_SECONDS
    while True:
        with rt.db.read() as db:  # a job deletes its outbox row when it starts
            if db.execute(select(Outbox.id).where(Outbox.id.in_([row_id for row_id, _ in left]))).first() is None:
                return None
        if time.monotonic() >= deadline:
            return f"no `hitl serve` took turn {turns} within {defaults.HAND_OVER_WAIT_SECONDS:g} s"
        time.sleep(0.1)


def resumed_turns(rt: Runtime) -> set[str]:
    executor = cast(HandOver, rt.executor)  # (operator_runtime's)
    return {args[0] for _, job, args in executor.queued + executor.left if job == "run_turn"}


# -- commands --------------------------------------------------------------------------------------------


def cmd_requests(args: argparse.Namespace) -> None:
    page = list_requests(operator_runtime(), status=args.status, session_id=args.session, limit=args.limit,
                         after=args.after)
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
    """One line: `approved req_... as alice; turn turn_... resumes` (`--json`: the API's document)."""
    if (args.choice is None) == (args.text is None):
        raise ConfigurationError("give exactly one of an option (approve, deny, ...) or --text")
    response = InputResponse(request_id=args.request_id, option_id=args.choice, text=args.text or args.note)
    rt = operator_runtime(args.request_id)
    [result] = submit_responses(rt, operator_principal(args.operator), [response])
    if args.json:
        print(json.dumps(result.wire(), indent=2))
    if result.status == "refused":
        sys.exit(f"hitl: {args.operator} may not answer {result.request_id}: {result.reason}")
    if result.status == "stale":
        sys.exit(f"hitl: {result.request_id} is no longer open: {result.reason}")
    request = result.request
    if result.status == "pending":
        print(f"recorded {args.operator}'s answer to {request.request_id}: the response policy has not decided yet")
        return
    problem = not_handed_over(rt)
    if problem:
        sys.exit(f"hitl: {request.outcome} {request.request_id} as {args.operator}, but {problem}: {RESUMES_LATER}")
    if args.json:
        return
    if request.turn_id is None:
        print(f"{request.outcome} {request.request_id} as {args.operator}; the agent that asked it, elsewhere, "
              "hears it (its long-poll, its callback)")
        return
    print(f"{request.outcome} {request.request_id} as {args.operator}; turn {request.turn_id} "
          f"{turn_state(rt, request.turn_id)}")


def turn_state(rt: Runtime, turn_id: str) -> str:
    """What an answer did to its turn: it resumes, it still waits on other requests, or it runs on."""
    if turn_id in resumed_turns(rt):
        return "resumes"
    with rt.db.read() as db:
        still_open = pending_requests(db, turn_id)
    return f"waits on {still_open} more open request(s)" if still_open else "is running and goes on with it"


def timestamp(iso: str | None) -> str:
    return iso[:19].replace("T", " ") if iso else "-"


def who(principal: dict[str, Any] | None) -> str:
    """`slack:T1:U1 (slack)`; a person's principal with the person: `twilio:+15551230001 (twilio, Alice Ng)`."""
    if not principal:
        return "-"
    person = (principal.get("attributes") or {}).get("personName")
    return f"{principal['principalId']} ({principal['authenticator']}{f', {person}' if person else ''})"


def cmd_sessions(args: argparse.Namespace) -> None:
    page = list_sessions(operator_runtime(), limit=args.limit, before=args.before)
    print(f"{'SESSION':38} {'STATUS':8} {'CHANNEL':10} {'PENDING':7} CREATED")
    for s in page["sessions"]:
        print(f"{s['id']:38} {s['status']:8} {s['channel']:10} {s['pendingRequests']:<7} {timestamp(s['createdAt'])}")
    if page["next"]:
        print(f"more: add --before {page['next']}", file=sys.stderr)


def cmd_show(args: argparse.Namespace) -> None:
    history = session_history(operator_runtime(), args.session_id, before=args.before)
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
    rt = operator_runtime()
    done = resume_turn(rt, args.turn_id)
    problem = not_handed_over(rt)
    if problem:
        sys.exit(f"hitl: turn {args.turn_id} {done}, but {problem}: {RESUMES_LATER}")
    print(f"turn {args.turn_id} {done}")


def cmd_sweep(args: argparse.Namespace) -> None:
    rt = operator_runtime()
    print(json.dumps(sweep(rt).__dict__))
    problem = not_handed_over(rt)
    if problem:
        sys.exit(f"hitl: swept, but {problem}: {RESUMES_LATER}")
