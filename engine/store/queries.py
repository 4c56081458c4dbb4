"""Read models for the API and the CLI: session history, the request inbox, the event stream.

Each reads what `seen_by` sees (engine/store/access.py): None, the operator's view, is everything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from sqlalchemy import Row, ScalarSelect, Select, func, literal, select, tuple_, union_all
from sqlalchemy.orm import Session as DbSession
from sqlalchemy.orm import aliased

from engine import defaults
from engine.answers.edits import read_stored
from engine.answers.input_requests import external_fields, request_wire, schedule_fields
from engine.answers.quorum import external_quorums, request_approvals, tool_need
from engine.errors import InvalidQuery, NotFound
from engine.jobs.runtime import Runtime
from engine.protocol import Principal
from engine.store.access import request_seen, requests_seen_by, session_seen, session_ways
from engine.store.events import events_wire
from engine.store.statuses import RequestStatus
from engine.store.tables import Event, InputRequest, Message, ResponseCandidate, Run, Session, ToolCall, Turn

T = TypeVar("T")


def session_history(rt: Runtime, session_id: str, seen_by: Principal | None = None, before: str | None = None,
                    limit: int = defaults.HISTORY_TURNS) -> dict[str, Any]:
    """A session's history in one document: its latest `limit` turns, in order, with their runs, requests (with
    candidates), tool calls and messages; with `before` (a turn id: the previous page's `next`), the `limit`
    turns before that one. `next` is the first turn's id when earlier turns exist, else None. `requests` holds
    the session's latest `limit` external requests (with candidates), which belong to no turn, on the latest
    page only. A session `seen_by` does not see is NotFound, as one that does not exist."""
    with rt.db.read() as db:
        session = found_session(db, session_id, seen_by)
        cursor = None if before is None else ("before", "turn of this session", own_turn(db, session_id, before))
        newest, oldest = page_of(db, select(Turn).where(Turn.session_id == session_id), TURNS_ORDER, cursor,
                                 limit, newest_first=True)
        turns = [turn for turn, in newest[::-1]]
        turn_ids = [t.id for t in turns]
        runs = db.execute(select(Run).where(Run.turn_id.in_(turn_ids)).order_by(Run.seq)).scalars().all()
        requests = db.execute(
            select(InputRequest).where(InputRequest.turn_id.in_(turn_ids)).order_by(InputRequest.seq)
        ).scalars().all()
        external = [] if before is not None else db.execute(  # on the latest page, the latest `limit`
            select(InputRequest).where(InputRequest.session_id == session_id, InputRequest.turn_id.is_(None))
            .order_by(InputRequest.seq.desc()).limit(limit)).scalars().all()[::-1]
        candidates = db.execute(
            select(ResponseCandidate).where(ResponseCandidate.request_id.in_(
                [q.request_id for q in (*requests, *external)])).order_by(ResponseCandidate.created_at)
        ).scalars().all()

        def with_candidates(request: InputRequest) -> dict[str, Any]:
            return request_wire(request) | {"candidates": [candidate_wire(c) for c in candidates
                                                           if c.request_id == request.request_id]}

        calls = db.execute(
            select(ToolCall).where(ToolCall.turn_id.in_(turn_ids)).order_by(ToolCall.step, ToolCall.position)
        ).scalars().all()
        messages = db.execute(
            select(Message).where(Message.session_id == session_id, Message.turn_id.in_(turn_ids))
            .order_by(Message.seq)
        ).scalars().all()
        return {
            "id": session.id, "title": title_of(db.scalar(select(first_message(session.id)))), "agent": session.agent,
            "status": session.status, "channel": session.channel, "address": session.address,
            "initiator": session.initiator, "createdAt": session.created_at.isoformat(),
            "turns": [
                {
                    "id": t.id, "seq": t.seq, "status": t.status, "input": t.input, "result": t.result,
                    "error": t.error, "requestedBy": t.requested_by,
                    "runs": [{"id": r.id, "seq": r.seq, "status": r.status, "startedAt": r.started_at.isoformat(),
                              "endedAt": r.ended_at.isoformat() if r.ended_at else None, "error": r.error}
                             for r in runs if r.turn_id == t.id],
                    "requests": [with_candidates(q) for q in requests if q.turn_id == t.id],
                    "toolCalls": [call_wire(c) for c in calls if c.turn_id == t.id],
                    "messages": [message_wire(m) for m in messages if m.turn_id == t.id],
                }
                for t in turns
            ],
            "requests": [with_candidates(q) for q in external],
            "next": oldest.id if oldest else None,
        }


def own_turn(db: DbSession, session_id: str, turn_id: str) -> Turn | None:
    """Turn `turn_id` if it is one of the session's."""
    turn = db.get(Turn, turn_id)
    return turn if turn is not None and turn.session_id == session_id else None


def must_see(row: T | None, what: str, key: str, row_id: str) -> T:
    """`row`; NotFound when there is none or it is not seen (session_seen, request_seen): the two answer the same."""
    if row is None:
        raise NotFound(f"no {what} {row_id!r}", {key: row_id})
    return row


def found_session(db: DbSession, session_id: str, seen_by: Principal | None) -> Session:
    return must_see(session_seen(db, session_id, seen_by), "session", "sessionId", session_id)


def require_seen(rt: Runtime, seen_by: Principal | None, *, session_id: str | None = None,
                 request_id: str | None = None) -> None:
    """NotFound unless `seen_by` sees the session, or is asked the request: the API's check before acting."""
    with rt.db.read() as db:
        if session_id is not None:
            found_session(db, session_id, seen_by)
        if request_id is not None:
            must_see(request_seen(db, request_id, seen_by), "input request", "requestId", request_id)


TITLE_LENGTH = 80
"""A session's title is its first message on one line, cut to this many characters."""


def title_of(message: str | None) -> str | None:
    """A session's title from its first message: on one line, cut with an ellipsis past TITLE_LENGTH; None for a
    session that has had no message yet."""
    if message is None:
        return None
    line = " ".join(message.split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1].rstrip() + "…"


def first_message(session_id: Any) -> ScalarSelect[str]:
    """The start of the first message (the first turn's input) of the session `session_id` names, as much as
    title_of needs, for a page's query: no row of it is read separately."""
    return select(func.substr(Turn.input, 1, 4 * TITLE_LENGTH)) \
        .where(Turn.session_id == session_id, Turn.seq == 1).scalar_subquery()


def candidate_wire(c: ResponseCandidate) -> dict[str, Any]:
    text, edited = read_stored(c.decision, c.text)
    return {"candidateId": c.candidate_id, "responder": c.responder, "decision": c.decision, "text": text,
            "input": edited, "outcome": c.outcome, "reason": c.reason, "createdAt": c.created_at.isoformat()}


def call_wire(c: ToolCall) -> dict[str, Any]:
    return {"callId": c.call_id, "toolName": c.tool, "input": c.input, "status": c.status, "result": c.result,
            "approvalRequestId": c.approval_request_id, "attempts": c.attempts}


def message_wire(m: Message) -> dict[str, Any]:
    return {"seq": m.seq, "role": m.role, "content": m.content, "toolCalls": m.tool_calls,
            "toolCallId": m.tool_call_id}


INBOX_ORDER = (InputRequest.created_at, InputRequest.seq, InputRequest.request_id)
"""Oldest first; a session's requests of one moment by their number; the id makes the order total (a cursor)."""
SESSIONS_ORDER = (Session.created_at, Session.id)
"""Read newest first; the id makes the order total."""
TURNS_ORDER = (Turn.seq,)
"""A session's turns, read newest first (its unique index on (session, seq) holds them in that order)."""


def page_of(db: DbSession, query: Select[*tuple[Any, ...]], order: tuple[Any, ...], cursor: tuple[str, str, Any] | None,
            limit: int | None, newest_first: bool = False) -> tuple[list[Row[*tuple[Any, ...]]], Any | None]:
    """A page of `query` in `order` (or its reverse), after the row a cursor names: (parameter, what it names,
    the row or None). Returns the result rows and, when more may follow, the last one's entity (the query's
    first column): a keyset cursor, so a row added or removed meanwhile moves no other row from its page."""
    rows = list(db.execute(keyset(query, order, cursor, limit, newest_first)))
    more = limit is not None and len(rows) > limit
    page = rows[:limit] if more else rows
    return page, (page[-1][0] if more and page else None)


Q = TypeVar("Q", bound=Select[*tuple[Any, ...]])


def keyset(query: Q, order: tuple[Any, ...], cursor: tuple[str, str, Any] | None, limit: int | None,
           newest_first: bool = False) -> Q:
    """`query` as `page_of` reads it: after the cursor's row, in `order` (or its reverse), one row more than
    `limit` (whether more follow)."""
    if cursor is not None:
        parameter, what, anchor = cursor
        if anchor is None:
            raise InvalidQuery(f"`{parameter}` names no {what}", {"parameter": parameter})
        here = tuple_(*order)
        there = tuple_(*(literal(getattr(anchor, column.key), column.type) for column in order))  # ids are packed
        query = query.where(here < there if newest_first else here > there)
    query = query.order_by(*(column.desc() for column in order) if newest_first else order)
    return query if limit is None else query.limit(limit + 1)


def list_requests(rt: Runtime, *, status: str | None = None, session_id: str | None = None,
                  limit: int | None = None, after: str | None = None,
                  seen_by: Principal | None = None) -> dict[str, Any]:
    """The inbox, oldest first: `{requests, next}`, at most `limit` of them, those after request `after` (the
    previous page's `next`, which `seen_by` must see). `next` is the last one's id when more may follow, else
    None. Each request carries its session's title, agent and channel, and a pending approval that takes several
    people the progress of its quorum (`approvals`), as `get_request` shows it."""
    query = in_session(select(InputRequest))
    if seen_by is not None:
        query = query.where(requests_seen_by(seen_by))
    if status:
        query = query.where(InputRequest.status == status)
    if session_id:
        query = query.where(InputRequest.session_id == session_id)
    with rt.db.read() as db:
        cursor = None if after is None else ("after", "input request", request_seen(db, after, seen_by))
        page, last = page_of(db, query, INBOX_ORDER, cursor, limit)
        return {"requests": listed(rt, db, page), "next": last.request_id if last else None}


def listed(rt: Runtime, db: DbSession, page: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """A page of requests as the inbox lists them; a pending approval that takes several people with the approves
    counted so far (`approvals`: a settled one's are in its response). No query per row but for such approvals:
    an in-process one's need is its tool's, the page's external quorums are read at once."""
    pending = [row[0] for row in page if row[0].status == RequestStatus.PENDING and row[0].kind == "tool-approval"]
    quorums = external_quorums(db, [request.request_id for request in pending if request.turn_id is None])
    shown = []
    for row in page:
        wire, request = inbox_wire(row), row[0]
        if request in pending:
            need = tool_need(rt, request) if request.turn_id is not None else quorums.get(request.request_id, 1)
            approvals = request_approvals(rt, db, request, need)
            wire["approvals"] = approvals.wire() if approvals is not None else None
        shown.append(wire)
    return shown


def in_session(query: Select[InputRequest]) -> Select[InputRequest, str, str, str]:
    """Requests with their session's title, agent and channel, read in the same query."""
    return query.add_columns(first_message(InputRequest.session_id), Session.agent, Session.channel) \
        .join(Session, Session.id == InputRequest.session_id)


def inbox_wire(row: Sequence[Any]) -> dict[str, Any]:
    request, message, agent, channel = row
    return request_wire(request) | {"title": title_of(message), "agent": agent, "channel": channel}


def pending_inbox(rt: Runtime, limit: int, seen_by: Principal | None = None) -> dict[str, Any]:
    """Which requests the inbox's first page of pending ones (`list_requests(status="pending", limit=limit,
    seen_by=seen_by)`) holds, by id only: `{requestIds, next}`."""
    with rt.db.read() as db:
        query = select(InputRequest.request_id).where(InputRequest.status == RequestStatus.PENDING)
        if seen_by is not None:
            query = query.where(requests_seen_by(seen_by))
        page, last = page_of(db, query, INBOX_ORDER, None, limit)
        return {"requestIds": [request_id for request_id, in page], "next": last}


def get_request(rt: Runtime, request_id: str, seen_by: Principal | None = None) -> dict[str, Any]:
    """One request, with its session's title, agent and channel, its reminders and escalation
    (`schedule_fields`) and the progress of its quorum (`approvals`); an external one with its approvers, quorum,
    metadata and callback too (`external_fields`)."""
    return request_state(rt, request_id, seen_by)[0]


def request_state(rt: Runtime, request_id: str, seen_by: Principal | None = None) -> tuple[dict[str, Any], int]:
    """One request (as `get_request`) and the seq of its session's latest event, read together: a change to the
    request comes with an event, so a long-poll waits for the seq to move past this one."""
    with rt.db.read() as db:
        must_see(request_seen(db, request_id, seen_by), "input request", "requestId", request_id)
        row = db.execute(in_session(select(InputRequest)).add_columns(Session.event_seq)
                         .where(InputRequest.request_id == request_id)).one()
        request, seq = row[0], row[-1]
        shown = inbox_wire(row[:-1]) | schedule_fields(db, request)
        approvals = request_approvals(rt, db, request)
        shown["approvals"] = approvals.wire() if approvals is not None else None
        return (shown if request.turn_id is not None else shown | external_fields(db, request)), seq


def events_after(rt: Runtime, session_id: str, after: int = 0, limit: int = 1000,
                 seen_by: Principal | None = None) -> list[dict[str, Any]]:
    with rt.db.read() as db:
        found_session(db, session_id, seen_by)
        rows = list(db.execute(
            select(Event).where(Event.session_id == session_id, Event.seq > after).order_by(Event.seq).limit(limit)
        ).scalars())
        return events_wire(db, rows)


def list_sessions(rt: Runtime, limit: int | None = None, before: str | None = None,
                  seen_by: Principal | None = None) -> dict[str, Any]:
    """Newest first, with each one's title and number of open requests: `{sessions, next}`, at most `limit` of
    them, those older than session `before` (the previous page's `next`, which `seen_by` must see). For a
    principal, the page is made of a page of each way it sees sessions (engine/store/access.py `session_ways`),
    each read from its own index in order."""
    with rt.db.read() as db:
        cursor = None if before is None else ("before", "session", session_seen(db, before, seen_by))
        listed: Any = Session
        if seen_by is not None:  # the newest of a page of each way, both read in their indexes' order
            listed = aliased(Session, union_all(*(
                select(keyset(select(Session).where(way), SESSIONS_ORDER, cursor, limit, newest_first=True).subquery())
                for way in session_ways(seen_by))).subquery())
        page, last = page_of(db, select(listed, first_message(listed.id)), (listed.created_at, listed.id), cursor,
                             limit, newest_first=True)
        pending = dict(db.execute(  # of this page's sessions only: all of them are 100k rows at scale
            select(InputRequest.session_id, func.count())
            .where(InputRequest.status == RequestStatus.PENDING, InputRequest.session_id.in_([s.id for s, _ in page]))
            .group_by(InputRequest.session_id)
        ).all()) if page else {}
        sessions = [
            {"id": s.id, "title": title_of(message), "agent": s.agent, "channel": s.channel, "status": s.status,
             "createdAt": s.created_at.isoformat(), "updatedAt": s.updated_at.isoformat(),
             "pendingRequests": pending.get(s.id, 0)}
            for s, message in page
        ]
        return {"sessions": sessions, "next": last.id if last else None}
