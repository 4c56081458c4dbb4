"""The REST API's wire shapes: the bodies it validates and the documents it answers (and documents in OpenAPI).

Request bodies are strict (unknown keys are a 400). Response models mirror what `engine.store.queries` and the
API return; they only describe those documents (the OpenAPI contract), they do not produce them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import ConfigDict, Field, GetJsonSchemaHandler, model_validator
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from engine.defaults import HISTORY_TURNS, REMIND_MAX
from engine.protocol import InputRequestOut, InputResponse, Principal, Role, StrictWireModel, WireModel

MAX_QUERY_INT = 2**31 - 1
"""The largest integer a query parameter (`limit`, `after`) takes: every database stores it."""

Text = Annotated[str, Field(min_length=1)]


class _NullHidden:
    """`X | None` validated as pydantic's nullable X, so an error names the field (not `field.none` beside
    `field.<X's tag>`, as for a union), and shown as X alone in the JSON Schema."""

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return handler(schema["schema"] if schema["type"] == "nullable" else schema)


T = TypeVar("T")
Omittable = Annotated[T | None, _NullHidden()]
"""A field a client may leave out (or send as `null`): with `omitted()` as its default."""


def omitted(description: str | None = None, **field: Any) -> Any:
    """The default of a field a client may leave out, and that is never `null` in its JSON Schema."""
    return Field(None, description=description, json_schema_extra=lambda schema: schema.pop("default", None),
                 **field)


# -- request bodies and query parameters --------------------------------------------------------------


class NewSession(StrictWireModel):
    """POST /api/sessions: a message starts the first turn."""

    message: Omittable[Text] = omitted()
    channel: Omittable[Annotated[str, Field(min_length=1, max_length=32)]] = omitted(
        "a configured channel (slack, twilio, github) whose place receives this session's requests")
    address: Omittable[dict[str, Any]] = omitted(
        "where in the channel, e.g. Slack {channel, threadTs?}, Twilio {to}, GitHub {repo, issue}")

    @model_validator(mode="after")
    def _channel_and_address(self) -> NewSession:
        if (self.channel is None) != (self.address is None):
            raise ValueError("channel and address go together")
        return self


class SessionInput(StrictWireModel):
    """POST /api/sessions/<id>/input: exactly one of a message or input responses."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid",
        json_schema_extra={"oneOf": [{"required": ["message"]}, {"required": ["inputResponses"]}]},
    )

    message: Omittable[Text] = omitted()
    turn_policy: Omittable[Literal["steer", "queue"]] = omitted(
        "with a message: `steer` (default) lets the turn's own person redirect the running turn; `queue` waits "
        "for it to end (unless an approval is held)")
    input_responses: Omittable[Annotated[list[InputResponse], Field(min_length=1)]] = omitted()

    @model_validator(mode="after")
    def _exactly_one(self) -> SessionInput:
        if (self.message is None) == (self.input_responses is None):
            raise ValueError("send exactly one of message or inputResponses")
        if self.turn_policy is not None and self.message is None:
            raise ValueError("turnPolicy goes with a message")
        return self


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


QueryInt = Annotated[int, Field(ge=0, le=MAX_QUERY_INT)]
PAGE = 100
"""Sessions or requests per page of a list, unless the client asks for another `limit`."""
MAX_PAGE = 500
"""The largest `limit` a list takes (the API's and the CLI's): a page is read, and answered, whole."""
PageLimit = Annotated[int, Field(ge=0, le=MAX_PAGE)]


def query_int(raw: str) -> int | None:
    """`raw` as a QueryInt (digits only: no sign, no spaces), or None when it is not one."""
    return int(raw) if raw.isascii() and raw.isdigit() and int(raw) <= MAX_QUERY_INT else None


def page_limit(raw: str) -> int | None:
    """`raw` as a PageLimit, or None when it is not one."""
    value = query_int(raw)
    return value if value is not None and value <= MAX_PAGE else None


class SessionsQuery(WireModel):
    limit: PageLimit = Field(PAGE, description=f"at most this many sessions (up to {MAX_PAGE})")
    before: Omittable[str] = omitted("the next page: the `next` of the page before")


class HistoryQuery(WireModel):
    before: Omittable[str] = omitted("the earlier turns: the `next` of the page before")


class StreamQuery(WireModel):
    access_token: Omittable[str] = omitted(
        "event streams only: an API key, for EventSource clients", alias="access_token"
    )


class EventsQuery(StreamQuery):
    after: QueryInt = Field(0, description="only events with a greater `seq`")


class EventsHeaders(WireModel):
    last_event_id: Omittable[Annotated[str, Field(pattern=r"^[0-9]+$")]] = omitted(
        "event streams only: the last `seq` a reconnecting client has (wins over `after`)", alias="Last-Event-ID"
    )


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


class Me(WireModel):
    """Who the caller acts as, and what its key may do (docs/access.md)."""

    principal: Principal
    role: Role


class SessionCreated(WireModel):
    id: str
    turn_id: str | None = Field(None, description="present when a message started the first turn")


TITLE = "the session's first message on one line, cut to 80 characters with an ellipsis; null before its first"


class SessionSummary(WireModel):
    id: str
    title: str | None = Field(description=TITLE)
    agent: str
    channel: str
    status: str
    created_at: datetime
    updated_at: datetime
    pending_requests: int


class SessionList(WireModel):
    sessions: list[SessionSummary]
    next: str | None = Field(description="the last session's id when older ones may follow (pass it as `before`), "
                                         "else null")


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


class RunOut(WireModel):
    id: str
    seq: int
    status: str = Field(description="resuming, running, interrupted, succeeded, failed, crashed or cancelled")
    started_at: datetime
    ended_at: datetime | None
    error: dict[str, Any] | None


class ToolCallOut(WireModel):
    call_id: str
    tool_name: str
    input: dict[str, Any]
    status: str
    result: dict[str, Any] | None
    approval_request_id: str | None
    attempts: int


class MessageOut(WireModel):
    seq: int
    role: str
    content: str | None
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None


class TurnOut(WireModel):
    id: str
    seq: int
    status: str = Field(description="queued, running, waiting, completed, failed or cancelled")
    input: str
    result: str | None
    error: dict[str, Any] | None
    requested_by: Principal | None
    runs: list[RunOut]
    requests: list[HistoryRequest]
    tool_calls: list[ToolCallOut]
    messages: list[MessageOut]


class SessionHistory(WireModel):
    id: str
    title: str | None = Field(description=TITLE)
    agent: str
    status: str
    channel: str
    address: str
    initiator: Principal | None
    created_at: datetime
    turns: list[TurnOut] = Field(description=f"the latest {HISTORY_TURNS} turns, or the {HISTORY_TURNS} before "
                                             "`before`, oldest first")
    requests: list[HistoryRequest] = Field(description="external requests (they belong to no turn): the latest "
                                                    f"{HISTORY_TURNS}, oldest first, on the latest page only")
    next: str | None = Field(description="the first turn's id when earlier turns exist (pass it as `before`), "
                                         "else null")


class Event(WireModel):
    seq: int
    type: str
    turn_id: str | None
    at: datetime
    data: dict[str, Any]


class EventList(WireModel):
    events: list[Event]


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


class MessagePosted(WireModel):
    """What a message did to the session; `results` holds the settlement when it answered a request."""

    turn_id: str | None = Field(description="null when it answered an external request, or one escalated to the "
                                            "session, and no turn is under way")
    effect: Literal["answered", "steered", "queued", "started", "noted"]
    results: list[ResponseResult]


class TurnCancelled(WireModel):
    turn_id: str


class ErrorDetail(WireModel):
    code: str
    message: str
    details: Any = None


class Error(WireModel):
    error: ErrorDetail


class Health(WireModel):
    status: Literal["ok", "degraded"]
    checks: dict[str, str] = Field(description="`ok` or `error: <kind>` for the database and Redis")
