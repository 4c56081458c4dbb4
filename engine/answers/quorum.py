"""Quorum: an approval that takes `need` distinct people (`approvers(..., quorum=N)`, engine/policies.py).

An approve the response policy allowed is counted under the lock its request settles under (engine/answers/
submit.py `settle`), with the approves counted before it: the distinct people (engine/people.py `person_key`: a
person's principals count once, so someone approving twice counts once) whose approves are judged `pending`
candidates of the request. Short of the quorum the approve is itself judged `pending`, with the count as its
reason ("1 of 2 approvals: Alice Ng"), and its `approval.candidate` event carries the count (`approvals`), so
every place shows the progress. The approve that reaches the quorum settles the request, whose response records
exactly the people counted. A deny the policy allowed settles at once, uncounted. Counting under the lock is what
makes concurrent approvals settle once, with exactly `need` people recorded.
"""

from __future__ import annotations

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session as DbSession

from engine.jobs.runtime import Runtime
from engine.people import display_name, person_key
from engine.policies import need_of
from engine.protocol import Approvals, Approver, Principal
from engine.store.tables import ExternalRequest, InputRequest, ResponseCandidate

_COUNTED = select(ResponseCandidate.responder).where(
    ResponseCandidate.request_id == bindparam("request"), ResponseCandidate.outcome == "pending",
    ResponseCandidate.judged_at.is_not(None), ResponseCandidate.decision == "approve",
).order_by(ResponseCandidate.created_at, ResponseCandidate.candidate_id)
"""The approves counted toward a request's quorum so far (judged `pending`), first first; built once."""
_STATUS = select(InputRequest.status).where(InputRequest.request_id == bindparam("request"))
_EXTERNAL_QUORUM = select(ExternalRequest.quorum).where(ExternalRequest.request_id == bindparam("request"))


def counted(db: DbSession, request_id: str, need: int, also: Principal | None = None) -> Approvals:
    """The people whose approves count toward the request's quorum, with `also` (an approve being judged) last."""
    responders = [Principal.model_validate(wire) for wire in db.execute(_COUNTED, {"request": request_id}).scalars()]
    people: dict[str, Approver] = {}
    for principal in [*responders, *([also] if also is not None else [])]:
        key = person_key(db, principal.principal_id)
        if key not in people:
            name = display_name(db, principal.principal_id) or principal.display_name
            people[key] = Approver(name=name, principal=principal)
    return Approvals(have=len(people), need=need, by=list(people.values()))


def tally(db: DbSession, request_id: str, need: int, responder: Principal) -> Approvals | None:
    """Count an allowed approve toward the quorum, under the request's lock; None when the request is no longer
    pending (the caller then finds it closed) or takes one approval."""
    if need <= 1 or db.execute(_STATUS, {"request": request_id}).scalar_one() != "pending":
        return None
    return counted(db, request_id, need, responder)


def request_approvals(rt: Runtime, db: DbSession, request: InputRequest, need: int | None = None) -> Approvals | None:
    """A request's quorum progress as a read shows it: what its settling recorded, else the approves counted so
    far; None for a request that takes one approval. `need` when the caller read it (`external_quorums`)."""
    need = request_need(rt, db, request) if need is None else need
    if need <= 1 or request.kind != "tool-approval":
        return None
    recorded = (request.response or {}).get("approvals")
    return Approvals.model_validate(recorded) if recorded else counted(db, request.request_id, need)


def request_need(rt: Runtime, db: DbSession, request: InputRequest) -> int:
    """How many people must approve the request: an external request's quorum, else its tool's or its agent's
    response policy's."""
    if request.turn_id is None:
        return db.execute(_EXTERNAL_QUORUM, {"request": request.request_id}).scalar_one_or_none() or 1
    return tool_need(rt, request)


def tool_need(rt: Runtime, request: InputRequest) -> int:
    """An in-process approval's need, from its tool's response policy or its agent's (no query: the request's
    action names the tool)."""
    tool = rt.agent.tools.get(str((request.action or {}).get("toolName")))
    policy = (tool.response_policy if tool else None) or rt.agent.response_policy
    return need_of(policy) if policy is not None else 1


def external_quorums(db: DbSession, request_ids: list[str]) -> dict[str, int]:
    """The quorums over 1 of these external requests, in one query (a page of the inbox)."""
    if not request_ids:
        return {}
    rows = db.execute(select(ExternalRequest.request_id, ExternalRequest.quorum).where(
        ExternalRequest.request_id.in_(request_ids), ExternalRequest.quorum > 1)).tuples()
    return {request_id: quorum for request_id, quorum in rows if quorum is not None}
