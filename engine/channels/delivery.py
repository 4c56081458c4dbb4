"""`deliver(session_id)`: read the session's events after the channel's cursor and drive its adapter.

One deliverer per session at a time (a lease on the session row); every post is recorded under a stable
key before the cursor moves, so a retried job never posts twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, bindparam, case, func, or_, select, update
from sqlalchemy.orm import Session as DbSession

from engine import defaults
from engine.answers.input_requests import escalated_last, request_out, shown_in
from engine.channels.contract import (
    ChannelAdapter,
    ChannelRefused,
    ChannelUnavailable,
    Counting,
    QueuePosition,
    Refreshing,
    Reminder,
)
from engine.jobs.runtime import Runtime
from engine.policies import SessionInfo
from engine.protocol import Approvals, InputRequestOut, Principal
from engine.store.queries import first_message, title_of
from engine.store.statuses import CandidateOutcome, RequestStatus
from engine.store.tables import Event, InputRequest, Post, Session
from engine.turns.call_policies import session_info

log = logging.getLogger(__name__)

LEASE = timedelta(seconds=60)
NOT_TAKEN = (CandidateOutcome.REJECTED, CandidateOutcome.FAILED, CandidateOutcome.TIMED_OUT)
"""A response the policy refused, or could not judge: the responder is told why, and the request stays open."""

# a delivery's statements, built once (see turns/transitions.py)
_LEASE_FREE = (Session.delivery_lease_until.is_(None)) | (Session.delivery_lease_until < bindparam("now"))
_TAKE_LEASE = update(Session).where(
    Session.id == bindparam("session"), Session.delivered_seq < Session.event_seq, _LEASE_FREE,
).values(delivery_queued=False, delivery_lease_until=bindparam("until")).returning(Session)
_CLEAR_FLAG = update(Session).where(Session.id == bindparam("session")).values(delivery_queued=False)
_EVENTS_AFTER = select(Event).where(Event.session_id == bindparam("session"), Event.seq > bindparam("seq")) \
    .order_by(Event.seq)
_POSTS = select(Post.key, Post.ref).where(Post.session_id == bindparam("session"),
                                          Post.key.in_(bindparam("keys", expanding=True)))
_LET_GO = update(Session).where(Session.id == bindparam("session")).values(
    delivery_lease_until=bindparam("until", type_=Session.delivery_lease_until.type),
    delivered_seq=case((Session.delivered_seq < bindparam("seq"), bindparam("seq")), else_=Session.delivered_seq),
).returning(Session.delivered_seq < Session.event_seq)


def deliver(rt: Runtime, session_id: str) -> None:
    """Job body: deliver every event not yet delivered; safe to run twice or concurrently.

    A platform that says when to come back (a 429's `Retry-After`) is not called before then: the session keeps
    its delivery lease until that time, so no job or sweep delivers it sooner, and the sweep after it goes on
    from the first event not handled. Any other ChannelUnavailable fails the job, which RQ retries. A post the
    platform refused for good (ChannelRefused) is logged and recorded as not made: the delivery goes on."""
    while (pending := claim(rt, session_id)) is not None:
        delivered: list[int] = []
        until: datetime | None = None
        try:
            hand_over(rt, session_id, pending, delivered)
        except ChannelUnavailable as exc:
            if exc.retry_after is None:
                raise
            until = rt.now() + timedelta(seconds=exc.retry_after)
            log.warning("session %s: %s; its delivery goes on after %s", session_id, exc, until.isoformat())
        finally:
            behind = release(rt, session_id, delivered[-1] if delivered else 0, pending.unrecorded, until)
        if not behind or until is not None:
            return


@dataclass
class Pending:
    """What a deliverer that took the lease hands over: the events after the cursor, to the session's adapter,
    with what handing them over reads, read in the same transaction: the session's open requests (in the
    order a text channel shows them), the requests the events name, and the posts already made for either
    (key -> the platform's reference). Only the lease holder posts, so `posts` stays true as it records.
    `unrecorded`: the last post made, recorded before the next one or with the cursor, when the lease is let
    go (a delivery's last post takes no transaction of its own), and so is an edit of a post made already."""

    adapter: ChannelAdapter | None
    info: SessionInfo
    events: list[Event]
    open: list[InputRequestOut] = field(default_factory=list)
    requests: dict[str, InputRequestOut] = field(default_factory=dict)
    posts: dict[str, str | None] = field(default_factory=dict)
    unrecorded: list[Post] = field(default_factory=list)
    repeatable: bool = True
    """Whether every unrecorded post is an edit that a retry may repeat (the card of a settled request)."""


def claim(rt: Runtime, session_id: str) -> Pending | None:
    """Take the session's delivery lease and read the events after the cursor (None: nothing past the cursor,
    or another deliverer holds the lease). The queued flag is cleared first, whatever happens: events written
    from now on queue a new job, and a deliverer holding the lease re-checks before it lets go."""
    with rt.transaction() as db:
        now = rt.now()
        session = db.scalars(  # flag, lease and the session's row in one statement
            _TAKE_LEASE, {"session": session_id, "now": now, "until": now + LEASE},
            execution_options={"synchronize_session": False},
        ).one_or_none()
        if session is None:  # delivered already (by a deliverer that went on while this job was queued), or
            # another deliverer holds the lease: it re-checks before it lets go
            db.connection().execute(_CLEAR_FLAG, {"session": session_id})
            return None
        events = list(db.execute(_EVENTS_AFTER, {"session": session_id, "seq": session.delivered_seq}).scalars())
        adapter = rt.channels.get(session.channel)
        if adapter is None or not events:
            return Pending(adapter, session_info(session), events)
        return Pending(adapter, session_info(session), events, *read_for(db, session_id, events))


def read_for(db: DbSession, session_id: str, events: list[Event]) -> tuple[
        list[InputRequestOut], dict[str, InputRequestOut], dict[str, str | None]]:
    """The open requests the session shows (its own and those escalated to it), the requests the events name and
    the posts of both and of the events."""
    named = {r["requestId"] for e in events if e.type == "input.resolved" for r in e.data["resolutions"]}
    named |= {e.data["requestId"] for e in events if e.type in ("approval.candidate", "input.reminded",
                                                                "input.escalated")}
    showing = any(e.type in ("input.requested", "input.resolved") for e in events)
    where: list[ColumnElement[bool]] = [InputRequest.request_id.in_(named)] if named else []
    if showing:  # one read for both, in the order a text channel shows the open ones
        where.append(shown_in(session_id) & (InputRequest.status == RequestStatus.PENDING))
    read = titled(db, session_id, [request_out(r) for r in db.execute(
        select(InputRequest).where(or_(*where)).order_by(*escalated_last(session_id))).scalars()]) if where else []
    # (a request of another session that the events name escalated or shown to this one)
    opened = [r for r in read if showing and r.status == RequestStatus.PENDING]
    requests = {r.request_id: r for r in read if r.request_id in named}
    keys = [f"event:{e.seq}" for e in events]
    keys += [f"{kind}:{request_id}" for request_id in named | {r.request_id for r in opened}
             for kind in ("request", "settled")]
    posts = {key: ref for key, ref in db.execute(_POSTS, {"session": session_id, "keys": keys})}
    return opened, requests, posts


def titled(db: DbSession, session_id: str, requests: list[InputRequestOut]) -> list[InputRequestOut]:
    """The requests, those of other sessions (shown or escalated here) with their session's title after their
    prompt, `Approve refund? (Refund order 1234)`: a person shown requests from several sessions knows what each
    is about (and a text cut to fit cuts the title before the question)."""
    others = {r.session_id for r in requests if r.session_id != session_id}
    if not others:
        return requests
    titles = {found: place_title(title_of(message)) for found, message in db.execute(
        select(Session.id, first_message(Session.id)).where(Session.id.in_(others)))}
    return [r.model_copy(update={"prompt": f"{r.prompt} ({titles[r.session_id]})"}) if titles.get(r.session_id)
            else r for r in requests]


def place_title(title: str | None) -> str | None:
    """A session's title as a prompt shown elsewhere names it: at most PLACE_TITLE_LENGTH characters."""
    if title is None or len(title) <= defaults.PLACE_TITLE_LENGTH:
        return title
    return title[: defaults.PLACE_TITLE_LENGTH - 3].rstrip() + "..."


def release(rt: Runtime, session_id: str, delivered_seq: int, unrecorded: list[Post],
            until: datetime | None = None) -> bool:
    """Record the posts not yet recorded and let go of the lease (or hold it `until` then), the cursor moved up
    to `delivered_seq`, in one transaction. True when the session has events past the cursor (written while
    this deliverer ran, or left by a failed delivery)."""
    with rt.transaction() as db:
        db.add_all(unrecorded)
        return db.connection().execute(
            _LET_GO, {"session": session_id, "seq": delivered_seq, "until": until}).scalar_one()


def hand_over(rt: Runtime, session_id: str, pending: Pending, delivered: list[int]) -> None:
    """Hand the pending events to the adapter, appending each one's seq to `delivered` once it is handled.
    The cursor moves when the lease is released: a delivery cut short starts again from the first event not
    handled, and one cut shorter still (a killed worker) hands events again, whose posts are keyed, so
    nothing is posted twice."""
    for event in pending.events:
        if pending.adapter is not None:
            Delivery(rt, pending.adapter, session_id, pending).handle(event)
        delivered.append(event.seq)


class Delivery:
    """One event, turned into adapter calls, each recorded under a key so it happens once."""

    def __init__(self, rt: Runtime, adapter: ChannelAdapter, session_id: str, pending: Pending) -> None:
        self.rt, self.adapter, self.session_id, self.pending = rt, adapter, session_id, pending
        self.info = pending.info

    def handle(self, event: Event) -> None:
        data = event.data
        if event.type == "assistant.message" and data.get("text"):
            self.once(f"event:{event.seq}", "an assistant message", lambda: self.adapter.say(self.info, data["text"]))
        elif event.type == "turn.failed":
            message = (data.get("error") or {}).get("message", "unknown error")
            self.once(f"event:{event.seq}", f"the failure of turn {event.turn_id}",
                      lambda: self.adapter.say(self.info, f"That failed: {message}"))
        elif event.type == "approval.candidate" and data.get("outcome") in NOT_TAKEN:
            self.refusal(event.seq, data)
        elif event.type == "approval.candidate" and data.get("approvals"):
            self.progress(event.seq, data)
        elif event.type == "input.requested":
            self.show_open(event.seq)
        elif event.type == "input.resolved":
            for resolution in data["resolutions"]:
                self.update_closed(resolution["requestId"])
            self.show_open(event.seq)
        elif event.type == "input.reminded":
            self.remind(event.seq, data)
        elif event.type == "input.escalated":
            self.refresh(event.seq, data["requestId"])

    def once(self, key: str, what: str, post: Any) -> None:
        if key not in self.pending.posts:
            self.before_posting()
            self.record(key, self.attempt(what, post))

    def attempt(self, what: str, post: Any) -> Any:
        """`post()`, or None (not posted) when the platform refuses it for good: logged once, never retried."""
        try:
            return post()
        except ChannelRefused as exc:
            log.error("session %s: %s refused %s for good, so it is not posted and not retried: %s",
                      self.session_id, self.adapter.name, what, exc)
            return None

    def before_posting(self) -> None:
        """Record the last post made before the next is made: a retry after a crash then posts at most the
        one post it was making, as when each post commits on its own. Edits a retry may repeat wait for the
        next record."""
        if not self.pending.repeatable:
            with self.rt.transaction() as db:
                db.add_all(self.pending.unrecorded)
            self.pending.unrecorded.clear()
            self.pending.repeatable = True

    def record(self, key: str, ref: Any, repeatable: bool = False) -> None:
        ref = str(ref) if ref is not None else None
        self.pending.unrecorded.append(Post(session_id=self.session_id, key=key, channel=self.adapter.name,
                                            ref=ref, created_at=self.rt.now()))
        self.pending.posts[key] = ref
        self.pending.repeatable = self.pending.repeatable and repeatable

    def refusal(self, seq: int, data: dict[str, Any]) -> None:
        request = self.pending.requests[data["requestId"]]
        responder = Principal.model_validate(data["responder"])
        self.once(f"event:{seq}", f"the refusal of {responder.principal_id}'s answer to {request.request_id}",
                  lambda: self.adapter.refuse(self.info, request, responder, data.get("reason", "")))

    def update_closed(self, request_id: str) -> None:
        """Update the request's prompt, once, where it was shown."""
        shown_key, settled_key = f"request:{request_id}", f"settled:{request_id}"
        posts = self.pending.posts
        if shown_key not in posts or settled_key in posts:
            return  # never shown here (a text channel's queue skipped it), or updated already
        self.before_posting()
        self.attempt(f"the update of the prompt of {request_id}",
                     lambda: self.adapter.update(self.info, self.pending.requests[request_id], posts[shown_key]))
        self.record(settled_key, None, repeatable=self.adapter.update_edits and posts[shown_key] is not None)

    def open_here(self, request_id: str) -> str | None:
        """The platform's reference to the request's prompt here, while that prompt is shown with its controls
        (posted, and not updated as closed); None otherwise."""
        request = self.pending.requests[request_id]
        if request.status != RequestStatus.PENDING or f"settled:{request_id}" in self.pending.posts:
            return None
        return self.pending.posts.get(f"request:{request_id}")

    def remind(self, seq: int, data: dict[str, Any]) -> None:
        """Remind the people a request waits for, once, where its prompt is shown (a text channel that shows
        another request now does not remind of this one)."""
        request_id = data["requestId"]
        ref = self.open_here(request_id)
        if ref is None:
            return
        reminder = Reminder(data["count"], data.get("max"), tuple(data.get("approvers", ())))
        self.once(f"event:{seq}", f"reminder {reminder.count} of {request_id}",
                  lambda: self.adapter.remind(self.info, self.pending.requests[request_id], ref, reminder))

    def progress(self, seq: int, data: dict[str, Any]) -> None:
        """Show how far a quorum got, once, where the request's prompt is shown with its controls (a request that
        settled meanwhile shows its outcome instead); at a place other than the request's own session the adapter
        hears who approved (`elsewhere`: it tells the count only where that person answered, or on a card)."""
        request_id = data["requestId"]
        ref = self.open_here(request_id)
        if ref is None or not isinstance(self.adapter, Counting):
            return
        adapter, approvals = self.adapter, Approvals.model_validate(data["approvals"])
        request = self.pending.requests[request_id].model_copy(update={"approvals": approvals})
        elsewhere = None if request.session_id == self.session_id else Principal.model_validate(data["responder"])
        self.once(f"event:{seq}", f"the count of {request_id}'s approvals",
                  lambda: adapter.progress(self.info, request, ref, elsewhere))

    def refresh(self, seq: int, request_id: str) -> None:
        """Show a request's prompt anew where the channel edits its posts (its card says it escalated)."""
        ref = self.open_here(request_id)
        if ref is None or not isinstance(self.adapter, Refreshing) or f"event:{seq}" in self.pending.posts:
            return
        adapter = self.adapter
        self.before_posting()
        self.attempt(f"the update of the prompt of {request_id}",
                     lambda: adapter.refresh(self.info, self.pending.requests[request_id], ref))
        self.record(f"event:{seq}", None, repeatable=True)

    def show_open(self, seq: int) -> None:
        """Every open request (or, for a text channel, only the first) that is not shown yet, of those opened by
        event `seq` or before: a request opened later (the model spoke, then asked again) waits for its own
        `input.requested`, so it is never shown before what was said before it."""
        later = {i for e in self.pending.events if e.type == "input.requested" and e.seq > seq for i in opened_by(e)}
        queue = [r for r in self.pending.open if r.request_id not in later]
        shown = [(r, QueuePosition(i, len(queue))) for i, r in enumerate(queue, start=1)]
        if self.adapter.one_at_a_time:
            shown = shown[:1]
        for request, position in shown:
            self.once(f"request:{request.request_id}", f"the prompt of {request.request_id}",
                      lambda r=request, p=position: self.adapter.show(self.info, r, p))


def opened_by(event: Event) -> list[str]:
    """The requests an `input.requested` opened: stored by id (events written before that carry them inline)."""
    if "requestIds" in event.data:
        return list(event.data["requestIds"])
    return [r["requestId"] for r in event.data.get("requests", [])]


def forget_unposted_prompts(db: DbSession, session_ids: list[str]) -> list[str]:
    """Forget the prompts of open requests that were recorded as shown but never posted (`show()` returned
    None: the address was unreachable) and rewind those sessions to their latest `input.*` event, so the next
    delivery shows them again (every other post is keyed, so nothing else is posted twice).
    Returns the sessions to deliver."""
    unposted = db.execute(select(Post).where(
        Post.session_id.in_(session_ids), Post.key.startswith("request:"), Post.ref.is_(None))).scalars().all()
    forgotten = set()
    for post in unposted:
        request = db.get(InputRequest, post.key.removeprefix("request:"))
        if request is not None and request.status == RequestStatus.PENDING:
            db.delete(post)
            forgotten.add(post.session_id)
    for session_id in forgotten:
        seq = db.execute(select(func.max(Event.seq)).where(
            Event.session_id == session_id, Event.type.in_(["input.requested", "input.resolved"]))).scalar_one()
        db.execute(update(Session).where(Session.id == session_id, Session.delivered_seq >= seq)
                   .values(delivered_seq=seq - 1))
    return sorted(forgotten)


def stale_sessions(rt: Runtime, limit: int = 500) -> list[str]:
    """Channel sessions whose events are not all delivered and whose delivery is not queued (for sweep(); a
    queued delivery's job is in the outbox, which push_outbox() recovers)."""
    if not rt.channels:
        return []
    with rt.db.read() as db:
        return list(db.execute(select(Session.id).where(
            Session.channel.in_(list(rt.channels)), Session.delivered_seq < Session.event_seq,
            Session.delivery_queued.is_(False),
            (Session.delivery_lease_until.is_(None)) | (Session.delivery_lease_until < rt.now()),
        ).limit(limit)).scalars())


def shown_requests(rt: Runtime, channel: str, address: str, limit: int = 100) -> list[tuple[str, InputRequestOut]]:
    """The requests `channel` posted at `address` (any of its sessions there), newest first, each with the
    platform's reference to its post: a text channel tells from them which prompt a reply answers."""
    with rt.db.read() as db:
        posts = db.execute(select(Post.key, Post.ref).join(Session, Session.id == Post.session_id).where(
            Session.channel == channel, Session.address == address, Post.key.startswith("request:"),
            Post.ref.is_not(None),
        ).order_by(Post.id.desc()).limit(limit)).all()
        ids = [key.removeprefix("request:") for key, _ in posts]
        found = {r.request_id: request_out(r) for r in
                 db.execute(select(InputRequest).where(InputRequest.request_id.in_(ids))).scalars()}
    return [(str(ref), found[request_id]) for (_, ref), request_id in zip(posts, ids, strict=True)]
