"""Read models for the API and the CLI: session history, the request inbox, the event stream."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, func, literal, select, tuple_
from sqlalchemy.orm import Session as DbSession

from . import defaults
from .errors import InvalidQuery, NotFound
from .events import events_wire
from .requests import external_wire, request_wire
from .runtime import Runtime
from .tables import Event, InputRequest, Message, ResponseCandidate, Run, Session, ToolCall, Turn


def session_history(rt: Runtime, session_id: str, before: str | None = None,
                    limit: int = defaults.HISTORY_TURNS) -> dict[str, Any]:
    """A session's history in one document: its latest `limit` turns, in order, with their runs, requests (with
    candidates), tool calls and messages; with `before` (a turn id: the previous page's `next`), the `limit`
    turns before that one. `next` is the first turn's id when earlier turns exist, else None. `requests` holds
    the session's latest `limit` external requests (with candidates), which belong to no turn, on the latest
    page only."""
    with rt.db.read() as db:
        session = db.get(Session, session_id)
        if session is None:
            raise NotFound(f"no session {session_id!r}", {"sessionId": session_id})
        cursor = None if before is None else ("before", "turn of this session", own_turn(db, session_id, before))
        newest, oldest = page_of(db, select(Turn).where(Turn.session_id == session_id), TURNS_ORDER, cursor,
                                 limit, newest_first=True)
        turns = newest[::-1]
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
            "id": session.id, "agent": session.agent, "status": session.status, "channel": session.channel,
            "address": session.address, "initiator": session.initiator, "createdAt": session.created_at.isoformat(),
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


def candidate_wire(c: ResponseCandidate) -> dict[str, Any]:
    return {"candidateId": c.candidate_id, "responder": c.responder, "decision": c.decision, "text": c.text,
            "outcome": c.outcome, "reason": c.reason, "createdAt": c.created_at.isoformat()}


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


def page_of(db: DbSession, query: Select[Any], order: tuple[Any, ...], cursor: tuple[str, str, Any] | None,
            limit: int | None, newest_first: bool = False) -> tuple[list[Any], Any | None]:
    """A page of `query` in `order` (or its reverse), after the row a cursor names: (parameter, what it names,
    the row or None). Returns the rows and the last of them when more may follow (a keyset cursor: a row
    added or removed meanwhile moves no other row from its page)."""
    if cursor is not None:
        parameter, what, anchor = cursor
        if anchor is None:
            raise InvalidQuery(f"`{parameter}` names no {what}", {"parameter": parameter})
        here = tuple_(*order)
        there = tuple_(*(literal(getattr(anchor, column.key), column.type) for column in order))  # ids are packed
        query = query.where(here < there if newest_first else here > there)
    query = query.order_by(*(column.desc() for column in order) if newest_first else order)
    rows = list(db.execute(query if limit is None else query.limit(limit + 1)).scalars())
    more = limit is not None and len(rows) > limit
    page = rows[:limit] if more else rows
    return page, (page[-1] if more and page else None)


def list_requests(rt: Runtime, *, status: str | None = None, session_id: str | None = None,
                  limit: int | None = None, after: str | None = None) -> dict[str, Any]:
    """The operator inbox, oldest first: `{requests, next}`, at most `limit` of them, those after request
    `after` (the previous page's `next`). `next` is the last one's id when more may follow, else None."""
    query = select(InputRequest)
    if status:
        query = query.where(InputRequest.status == status)
    if session_id:
        query = query.where(InputRequest.session_id == session_id)
    with rt.db.read() as db:
        cursor = None if after is None else ("after", "input request", db.get(InputRequest, after))
        page, last = page_of(db, query, INBOX_ORDER, cursor, limit)
        return {"requests": [request_wire(r) for r in page], "next": last.request_id if last else None}


def get_request(rt: Runtime, request_id: str) -> dict[str, Any]:
    """One request; an external one with its approvers, metadata and callback (`external_wire`)."""
    return request_state(rt, request_id)[0]


def request_state(rt: Runtime, request_id: str) -> tuple[dict[str, Any], int]:
    """One request (as `get_request`) and the seq of its session's latest event, read together: a change to the
    request comes with an event, so a long-poll waits for the seq to move past this one."""
    with rt.db.read() as db:
        row = db.execute(select(InputRequest, Session.event_seq).join(Session, Session.id == InputRequest.session_id)
                         .where(InputRequest.request_id == request_id)).one_or_none()
        if row is None:
            raise NotFound(f"no input request {request_id!r}", {"requestId": request_id})
        request, seq = row
        return (request_wire(request) if request.turn_id is not None else external_wire(db, request)), seq


def latest_seq(rt: Runtime, session_id: str) -> int:
    """The seq of the session's latest event (0: none yet); NotFound for no such session."""
    with rt.db.read() as db:
        seq = db.execute(select(Session.event_seq).where(Session.id == session_id)).scalar_one_or_none()
    if seq is None:
        raise NotFound(f"no session {session_id!r}", {"sessionId": session_id})
    return seq


def events_after(rt: Runtime, session_id: str, after: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
    with rt.db.read() as db:
        if db.get(Session, session_id) is None:
            raise NotFound(f"no session {session_id!r}", {"sessionId": session_id})
        rows = list(db.execute(
            select(Event).where(Event.session_id == session_id, Event.seq > after).order_by(Event.seq).limit(limit)
        ).scalars())
        return events_wire(db, rows)


def list_sessions(rt: Runtime, limit: int | None = None, before: str | None = None) -> dict[str, Any]:
    """Newest first, with the number of open requests each holds: `{sessions, next}`, at most `limit` of them,
    those older than session `before` (the previous page's `next`)."""
    with rt.db.read() as db:
        cursor = None if before is None else ("before", "session", db.get(Session, before))
        page, last = page_of(db, select(Session), SESSIONS_ORDER, cursor, limit, newest_first=True)
        pending = dict(db.execute(  # of this page's sessions only: all of them are 100k rows at scale
            select(InputRequest.session_id, func.count())
            .where(InputRequest.status == "pending", InputRequest.session_id.in_([s.id for s in page]))
            .group_by(InputRequest.session_id)
        ).all()) if page else {}
        sessions = [
            {"id": s.id, "agent": s.agent, "channel": s.channel, "status": s.status,
             "createdAt": s.created_at.isoformat(), "updatedAt": s.updated_at.isoformat(),
             "pendingRequests": pending.get(s.id, 0)}
            for s in page
        ]
        return {"sessions": sessions, "next": last.id if last else None}
