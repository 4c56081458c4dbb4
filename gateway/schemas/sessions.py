"""The REST API's wire shapes of sessions and their turns: the bodies that open a session and send it input, the
queries of the session list, a session's history and its event stream, and the documents that answer them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from engine.defaults import HISTORY_TURNS
from engine.protocol import InputResponse, Principal, StrictWireModel, WireModel

from .common import MAX_PAGE, PAGE, TITLE, Omittable, PageLimit, QueryInt, Text, omitted
from .input_requests import HistoryRequest, ResponseResult

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


# -- responses -----------------------------------------------------------------------------------------


class SessionCreated(WireModel):
    id: str
    turn_id: str | None = Field(None, description="present when a message started the first turn")


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


class MessagePosted(WireModel):
    """What a message did to the session; `results` holds the settlement when it answered a request."""

    turn_id: str | None = Field(description="null when it answered an external request, or one escalated to the "
                                            "session, and no turn is under way")
    effect: Literal["answered", "steered", "queued", "started", "noted"]
    results: list[ResponseResult]


class TurnCancelled(WireModel):
    turn_id: str
