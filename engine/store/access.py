"""Who may see what: every read of a session or a request is `seen_by` a principal, or by everyone (None).

None is the operator's view (the CLI, the loopback operator, an `operator` API key): everything. A
principal (a `user` or `agent` API key's) sees the sessions it started and the requests it is asked; any
other session or request does not exist for it (the API answers 404, lists leave it out). A principal linked to
a person (engine/people.py) sees what any principal of that person sees: alice's API key sees the session she
started in Slack. A principal is matched by its digest (its whole identity), a person's principals by their
principal ids (`initiator_id`, `responder_id`, `requester_id`), as a person links them. All of these are SQL
conditions on indexed columns, so lists stay keyset pages of an index scan.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, Select, and_, literal, or_, select, true, union, union_all
from sqlalchemy.orm import Session as DbSession
from sqlalchemy.orm import aliased

from engine.errors import NotPermitted
from engine.people import GROUP, PERSON
from engine.protocol import Principal
from engine.store.storage import principal_digest
from engine.store.tables import (
    EscalationApprover,
    ExternalRequest,
    GroupMember,
    InputRequest,
    PersonPrincipal,
    PlatformGroupMember,
    RequestApprover,
    ResponseCandidate,
    Session,
)


def linked_principals(principal_id: str) -> Select[str]:
    """The principal ids of the person `principal_id` is linked to (itself among them); none when it is nobody's."""
    person = select(PersonPrincipal.person).where(PersonPrincipal.principal_id == principal_id).scalar_subquery()
    return select(PersonPrincipal.principal_id).where(PersonPrincipal.person == person)


def sessions_seen_by(principal: Principal | None) -> ColumnElement[bool]:
    """The sessions `principal` sees: those it started (its principal is their initiator), or any principal of its
    person did (`session_ways`)."""
    return true() if principal is None else or_(*session_ways(principal))


def session_ways(principal: Principal) -> tuple[ColumnElement[bool], ColumnElement[bool]]:
    """The two ways `principal` sees a session, apart, each read from an index of its own in the session list's
    order (engine/store/queries.py `list_sessions`): it started it (its principal id, and its digest: the same id
    from another authenticator or issuer is another identity), or another principal of its person did (their
    principal ids, read in the same statement: none for a principal that is nobody's)."""
    digest = principal_digest(principal.wire())
    return (started_by(principal, digest),
            and_(Session.initiator_id.in_(linked_principals(principal.principal_id)),
                 Session.initiator_digest != digest))


def started_by(principal: Principal, digest: str | None) -> ColumnElement[bool]:
    """The sessions `principal` started: read by its principal id's index (migration 0015)."""
    return and_(Session.initiator_id == principal.principal_id, Session.initiator_digest == digest)


def requests_seen_by(principal: Principal | None) -> ColumnElement[bool]:
    """The requests `principal` is asked, or asked itself, or any principal of its person is or did: those of a
    session it started, those it already responded to (a response of its is stored as a candidate, whatever its
    verdict), the external requests it made (an agent's) or is named an approver of (itself, its person, a group
    of either, or a platform group: `approver_items`), those an escalation made it an approver of, and the external
    requests of the console and the API that name no approvers (anyone with a key may answer those). Its person's
    principals are read in the same statement: none for a principal that is nobody's."""
    if principal is None:
        return true()
    digest = principal_digest(principal.wire())
    linked = linked_principals(principal.principal_id)
    items = approver_items(principal.principal_id)
    asked = aliased(InputRequest)  # not the outer query's table: the subquery stands on its own
    named = select(RequestApprover.request_id).where(RequestApprover.request_id == asked.request_id).exists()
    return InputRequest.request_id.in_(union(
        select(asked.request_id).join(Session, Session.id == asked.session_id).where(started_by(principal, digest)),
        select(asked.request_id).join(Session, Session.id == asked.session_id)
        .where(Session.initiator_id.in_(linked)),
        select(ResponseCandidate.request_id).where(ResponseCandidate.responder_digest == digest),
        select(ResponseCandidate.request_id).where(ResponseCandidate.responder_id.in_(linked)),
        select(ExternalRequest.request_id).where(ExternalRequest.requester_digest == digest),
        select(ExternalRequest.request_id).where(ExternalRequest.requester_id.in_(linked)),
        select(RequestApprover.request_id).where(RequestApprover.principal_id.in_(items)),
        select(EscalationApprover.request_id).where(EscalationApprover.principal_id.in_(items)),
        select(asked.request_id).join(Session, Session.id == asked.session_id)
        .where(asked.turn_id.is_(None), Session.channel == "api", ~named),
    ))


def approver_items(principal_id: str) -> Select[tuple[str]]:
    """The approvers items that name `principal_id` (engine/policies.py `approvers`): itself and its person's other
    principals, its person (`person:<name>`), the groups any of those is a member of (`group:<name>`), and the
    platform groups (`slack-usergroup:<id>`, `github-team:<org>/<slug>`) any of those was a member of when the
    group was last looked up (engine/channels/groups.py; however long ago: judging asks again when it is stale)."""
    person = select(PersonPrincipal.person).where(PersonPrincipal.principal_id == principal_id).scalar_subquery()
    own = union_all(
        select(literal(principal_id).label("item")),
        select(PersonPrincipal.principal_id).where(PersonPrincipal.person == person),
        select(literal(PERSON) + person),
    ).subquery()
    groups = select(literal(GROUP) + GroupMember.group).where(GroupMember.member.in_(select(own.c.item)))
    platform = select(PlatformGroupMember.item).where(PlatformGroupMember.principal_id.in_(select(own.c.item)))
    return union(select(own.c.item), groups, platform)  # type: ignore[return-value]


def session_seen(db: DbSession, session_id: str, principal: Principal | None) -> Session | None:
    """The session, if it exists and `principal` sees it."""
    if principal is None:
        return db.get(Session, session_id)
    return db.execute(select(Session).where(Session.id == session_id, sessions_seen_by(principal))).scalar()


def request_seen(db: DbSession, request_id: str, principal: Principal | None) -> InputRequest | None:
    """The request, if it exists and `principal` is asked it."""
    if principal is None:
        return db.get(InputRequest, request_id)
    return db.execute(select(InputRequest).where(InputRequest.request_id == request_id,
                                                 requests_seen_by(principal))).scalar()


def answers_requests(principal: Principal) -> bool:
    """Whether `principal` may answer requests: an agent's key creates sessions and asks people, it never
    answers (it would approve its own tool calls). Its messages steer or queue, never answer."""
    return principal.principal_type != "agent"


def check_answers_requests(principal: Principal) -> None:
    """NotPermitted (403) for a principal that may not answer (`answers_requests`)."""
    if not answers_requests(principal):
        raise NotPermitted("an agent does not answer requests; a person does",
                           {"principalId": principal.principal_id})
