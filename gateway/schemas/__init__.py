"""The REST API's wire shapes: the bodies it validates and the documents it answers (and documents in OpenAPI).

Request bodies are strict (unknown keys are a 400). Response models mirror what `engine.store.queries` and the
API return; they only describe those documents (the OpenAPI contract), they do not produce them.

By resource: `sessions` (sessions and their turns, history and events), `input_requests` (the requests people are
asked and the answers given to them) and `common` (optional fields, query integers and page sizes, and the
documents of no resource: the caller, an error, the health check). People and groups have theirs in
gateway/people.py. Every shape is importable from here.
"""

from .common import (
    MAX_PAGE,
    MAX_QUERY_INT,
    PAGE,
    TITLE,
    Error,
    ErrorDetail,
    Health,
    Me,
    Omittable,
    PageLimit,
    QueryInt,
    Text,
    omitted,
    page_limit,
    query_int,
)
from .input_requests import (
    MAX_EXPIRES_IN,
    MAX_METADATA_BYTES,
    MAX_PLACES,
    MAX_QUORUM,
    MAX_SCHEMA_BYTES,
    MAX_WAIT,
    CallbackState,
    EscalateOut,
    EscalateSpec,
    ExternalInputRequest,
    HistoryRequest,
    InboxRequest,
    InputRequest,
    NewRequest,
    OptionSpec,
    PendingInbox,
    PlaceSpec,
    PrincipalId,
    RemindOut,
    RemindSpec,
    RequestDetail,
    RequestList,
    RequestQuery,
    RequestsQuery,
    ResponseCandidate,
    ResponseResult,
    ResponseResults,
    Seconds,
    ShowPlaceSpec,
    ToolCallSpec,
)
from .sessions import (
    Event,
    EventList,
    EventsHeaders,
    EventsQuery,
    HistoryQuery,
    MessageOut,
    MessagePosted,
    NewSession,
    RunOut,
    SessionCreated,
    SessionHistory,
    SessionInput,
    SessionList,
    SessionsQuery,
    SessionSummary,
    StreamQuery,
    ToolCallOut,
    TurnCancelled,
    TurnOut,
)

__all__ = [
    "CallbackState", "Error", "ErrorDetail", "EscalateOut", "EscalateSpec", "Event", "EventList", "EventsHeaders",
    "EventsQuery", "ExternalInputRequest", "Health", "HistoryQuery", "HistoryRequest", "InboxRequest",
    "InputRequest", "MAX_EXPIRES_IN", "MAX_METADATA_BYTES", "MAX_PAGE", "MAX_PLACES", "MAX_QUERY_INT", "MAX_QUORUM",
    "MAX_SCHEMA_BYTES", "MAX_WAIT", "Me", "MessageOut", "MessagePosted", "NewRequest", "NewSession", "Omittable",
    "OptionSpec", "PAGE", "PageLimit", "PendingInbox", "PlaceSpec", "PrincipalId", "QueryInt", "RemindOut",
    "RemindSpec", "RequestDetail", "RequestList", "RequestQuery", "RequestsQuery", "ResponseCandidate",
    "ResponseResult", "ResponseResults", "RunOut", "Seconds", "SessionCreated", "SessionHistory", "SessionInput",
    "SessionList", "SessionSummary", "SessionsQuery", "ShowPlaceSpec", "StreamQuery", "TITLE", "Text",
    "ToolCallOut", "ToolCallSpec", "TurnCancelled", "TurnOut", "omitted", "page_limit", "query_int",
]
