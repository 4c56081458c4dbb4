"""The REST API's wire shapes of requests people are asked: the body of POST /api/requests and its parts, the
queries of the request list and of one request, and the documents that show requests and the answers given to them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from engine.defaults import REMIND_MAX
from engine.protocol import InputRequestOut, Principal, StrictWireModel, WireModel

from .common import MAX_PAGE, PAGE, TITLE, Omittable, PageLimit, omitted

# -- request bodies and query parameters --------------------------------------------------------------


MAX_SCHEMA_BYTES = 64 * 1024
"""An editable external request's `action.inputSchema`, stored with it: at most this many bytes of JSON."""


class ToolCallSpec(StrictWireModel):
    """The call a tool approval asks about, as the agent describes it."""

    kind: Literal["tool-call"] = "tool-call"
    tool_name: Annotated[str, Field(min_length=1, max_length=200)]
    input: dict[str, Any] = Field(default_factory=dict)
    input_schema: Omittable[dict[str, Any]] = omitted(
        f"with editable: the JSON Schema an edited input must fit (at most {MAX_SCHEMA_BYTES} bytes of JSON); none: "
        "any JSON object")


class OptionSpec(StrictWireModel):
    id: Omittable[Annotated[str, Field(min_length=1, max_length=100)]] = omitted("the label, when not given")
    label: Annotated[str, Field(min_length=1, max_length=150)]
    description: Omittable[Annotated[str, Field(min_length=1, max_length=500)]] = omitted()


class PlaceSpec(StrictWireModel):
    channel: Annotated[str, Field(min_length=1, max_length=32)] = Field(
        description="a configured channel: slack, twilio or github")
    address: dict[str, Any] = Field(
        description="as for POST /api/sessions: Slack {channel, threadTs?}, Twilio {to}, GitHub {repo, issue}")


class ShowPlaceSpec(StrictWireModel):
    """A place of `to`: a channel address (`channel` and `address`), `person` or `group` (one of the three)."""

    channel: Omittable[Annotated[str, Field(min_length=1, max_length=32)]] = omitted(
        "a configured channel: slack, twilio or github")
    address: Omittable[dict[str, Any]] = omitted(
        "as for POST /api/sessions: Slack {channel, threadTs?}, Twilio {to}, GitHub {repo, issue}")
    person: Omittable[Annotated[str, Field(min_length=1, max_length=100)]] = omitted(
        "a person's name: a direct message on their first linked channel that can reach them")
    group: Omittable[Annotated[str, Field(min_length=1, max_length=100)]] = omitted(
        "a group's name: each member, as a person place")


MAX_PLACES = 10


MAX_EXPIRES_IN = 30 * 24 * 3600
MAX_METADATA_BYTES = 16 * 1024
PrincipalId = Annotated[str, Field(min_length=1, max_length=200)]
MAX_QUORUM = 50


Seconds = Annotated[float, Field(gt=0, le=MAX_EXPIRES_IN)]


class RemindSpec(StrictWireModel):
    every: Seconds = Field(description="seconds between reminders, the first this long after it opens")
    max: Omittable[Annotated[int, Field(ge=1, le=100)]] = omitted(f"at most this many ({REMIND_MAX} when not given)")


class EscalateSpec(StrictWireModel):
    after: Seconds = Field(description="seconds still pending before it escalates")
    to: Omittable[PlaceSpec | Annotated[list[PlaceSpec], Field(min_length=1, max_length=10)]] = omitted(
        "where it is also shown then (a place, or a list)")
    approvers: Omittable[Annotated[list[PrincipalId], Field(min_length=1, max_length=50)]] = omitted(
        "principal ids who may settle it too from then on")


class NewRequest(StrictWireModel):
    """POST /api/requests: an agent running elsewhere asks people (docs/agents-anywhere.md); what happens while
    nobody answers: docs/reminders-and-timeouts.md."""

    kind: Literal["tool-approval", "question"]
    prompt: Omittable[Annotated[str, Field(min_length=1, max_length=4000)]] = omitted(
        "what people are asked; a tool approval's defaults to `Approve <toolName>?`")
    action: Omittable[ToolCallSpec] = omitted("tool approvals: the call")
    editable: Omittable[bool] = omitted(
        "tool approvals: it may be approved with another input (`{optionId: approve, input}`), which must fit "
        "action.inputSchema")
    options: Omittable[Annotated[list[OptionSpec], Field(min_length=2, max_length=5)]] = omitted(
        "questions: 2 to 5 options (none: a free-text answer)")
    allow_freeform: Omittable[bool] = omitted("questions: a typed answer is taken too (always, without options)")
    to: Omittable[ShowPlaceSpec | Annotated[list[ShowPlaceSpec], Field(min_length=1, max_length=MAX_PLACES)]] = \
        omitted("where it is shown (a place or a list): the first channel address is its session's place, every "
                "other place shows it too; without a channel address, in the console, the API and the CLI")
    approvers: Omittable[Annotated[list[PrincipalId], Field(min_length=1, max_length=50)]] = omitted(
        "who may settle it (operators always may): principal ids, person:<name>, group:<name>, "
        "slack-usergroup:<id> and github-team:<org>/<slug>; without it, anyone the place admits")
    quorum: Omittable[Annotated[int, Field(ge=1, le=MAX_QUORUM)]] = omitted(
        "tool approvals: how many distinct people must approve it (1 when not given); any one's deny settles it")
    expires_in: Omittable[Annotated[int, Field(ge=1, le=MAX_EXPIRES_IN)]] = omitted(
        "seconds until it closes `expired` (or as onTimeout says)")
    remind: Omittable[RemindSpec] = omitted("reminders while it waits")
    escalate: Omittable[EscalateSpec] = omitted("shown at more places, and settled by more approvers, after a while")
    on_timeout: Omittable[Literal["deny", "approve", "dismiss"]] = omitted(
        "what expiry means: deny (an approval's default), approve (only when given), dismiss (a question's)")
    idempotency_key: Omittable[Annotated[str, Field(min_length=1, max_length=200)]] = omitted(
        "the same key again (from the same caller) answers the same request")
    callback_url: Omittable[Annotated[str, Field(min_length=1, max_length=2000)]] = omitted(
        "POSTed `{type: input.resolved, request}` when it closes, signed per Standard Webhooks")
    metadata: Omittable[dict[str, Any]] = omitted(f"the agent's own, echoed back (at most {MAX_METADATA_BYTES} "
                                                  "bytes of JSON)")


MAX_WAIT = 60
"""The longest long-poll of a request, in seconds."""


class RequestQuery(WireModel):
    wait: Annotated[int, Field(ge=0, le=MAX_WAIT)] = Field(
        0, description=f"seconds (up to {MAX_WAIT}) to wait for a pending request to close before answering")


class RequestsQuery(WireModel):
    status: Omittable[Literal["pending", "resolved"]] = omitted()
    session_id: Omittable[str] = omitted("only this session's requests")
    limit: PageLimit = Field(PAGE, description=f"at most this many requests (up to {MAX_PAGE})")
    after: Omittable[str] = omitted("the next page: the `next` of the page before")


# -- responses -----------------------------------------------------------------------------------------


class InputRequest(InputRequestOut):
    """An InputRequest (DESIGN.md section 4)."""


class InboxRequest(InputRequest):
    """An InputRequest as the inbox lists it: with its session's title, agent and channel."""

    title: str | None = Field(description=TITLE)
    agent: str = Field(description="the session's agent")
    channel: str = Field(description="the session's channel: api, slack, twilio or github")


class CallbackState(WireModel):
    status: Literal["waiting", "sending", "retrying", "delivered", "failed"]
    attempts: int
    last_error: str | None
    next_attempt_at: datetime | None


class EscalateOut(WireModel):
    after: float | None = Field(description="seconds pending before it escalates")
    to: list[PlaceSpec] = Field(description="where it is also shown then")
    approvers: list[str] = Field(description="principal ids who may settle it too from then on")


class RemindOut(WireModel):
    every: float = Field(description="seconds between reminders")
    max: int = Field(description="at most this many")


class RequestDetail(InboxRequest):
    """One InputRequest (GET /api/requests/<id>): with its reminders and escalation as it was opened with them."""

    remind: RemindOut | None = Field(description="its reminders (null: none)")
    escalate: EscalateOut | None = Field(description="its escalation (null: none)")


class ExternalInputRequest(RequestDetail):
    """An external request (POST /api/requests): an InputRequest with no turn, and what its agent gave."""

    approvers: list[str] = Field(description="who may settle it (none: anyone its place admits); operators too")
    quorum: int = Field(description="how many distinct people must approve it")
    idempotency_key: str | None
    metadata: dict[str, Any] | None
    callback: CallbackState | None = Field(description="its callback's delivery; null without a callbackUrl")


class ResponseCandidate(WireModel):
    candidate_id: str
    responder: Principal
    decision: str | None
    text: str | None
    input: dict[str, Any] | None = Field(description="the input an approve edited (null: approved as proposed)")
    outcome: str = Field(description="pending, allowed, rejected, failed, timed-out or stale")
    reason: str | None
    created_at: datetime


class HistoryRequest(InputRequest):
    candidates: list[ResponseCandidate]


class RequestList(WireModel):
    requests: list[InboxRequest]
    next: str | None = Field(description="the last request's id when more may follow (pass it as `after`), else null")


class PendingInbox(WireModel):
    """Which requests the inbox's first page of pending ones holds (GET /api/requests?status=pending)."""

    request_ids: list[str] = Field(description="oldest first, at most 100")
    next: str | None = Field(description="the last id when more requests are pending, else null")


class ResponseResult(WireModel):
    request_id: str
    status: Literal["settled", "pending", "refused", "stale"]
    reason: str | None
    request: InputRequest


class ResponseResults(WireModel):
    results: list[ResponseResult]
