"""Errors the engine raises; the gateway maps them to HTTP statuses at the edge."""


class EngineError(Exception):
    """Base of every engine error. `code` is the stable machine-readable name."""

    code = "engine_error"

    def __init__(self, message: str, details: dict | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class GroupLookupFailed(Exception):  # noqa: N818 - a normal outcome: an approvers policy refuses with its reason
    """The members of a platform group (a Slack user group, a GitHub team) could not be had; the message says why.
    Raised by the channel adapters that list them (engine/channels/groups.py)."""


class AlreadyApplied(Exception):  # noqa: N818 - a normal outcome for a redelivered job
    """The inbound item behind this message or answer was applied before (a job that ran twice)."""


class NotFound(EngineError):
    code = "not_found"


class InvalidInput(EngineError):
    """The input is well-formed JSON but names something that does not fit (an unknown option...)."""

    code = "invalid_input"


class InvalidQuery(EngineError):
    """A list's cursor names nothing to page from (the gateway answers 400, as for any bad query)."""

    code = "invalid_query"


class RequestClosed(EngineError):
    """The request was already settled: nothing changes, ever."""

    code = "request_closed"


class ResponseRefused(EngineError):
    """The response policy refused this responder; the request stays open."""

    code = "response_refused"


class NotPermitted(EngineError):
    """This principal may not do that to this turn (cancel another person's turn)."""

    code = "not_permitted"


class Conflict(EngineError):
    code = "conflict"


class IdempotencyConflict(Conflict):
    """The requester used this idempotency key before, for a request with another body."""

    code = "idempotency_conflict"


class ToolDefinitionError(EngineError):
    code = "tool_definition"
