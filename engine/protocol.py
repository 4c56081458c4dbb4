"""Wire shapes of DESIGN.md section 4: camelCase JSON, pydantic at the boundary."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    """camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class StrictWireModel(WireModel):
    """Unknown keys are an error (a 400 at the edge)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class Principal(WireModel):
    """Who someone is, as a verified source said. Identity is the first four fields only."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    authenticator: str
    issuer: str
    principal_type: str
    principal_id: str
    attributes: dict[str, Any] = Field(default_factory=dict)

    @property
    def identity(self) -> tuple[str, str, str, str]:
        return (self.authenticator, self.issuer, self.principal_type, self.principal_id)

    def same_as(self, other: Principal | None) -> bool:
        return other is not None and self.identity == other.identity

    @property
    def display_name(self) -> str:
        """How messages name them: a person's principal as the person and the channel ("Alice Ng via SMS", see
        engine/people.py), else their name on the platform, else the principal id."""
        person = self.attributes.get("personName")
        if person:
            via = channel_word(self)
            return f"{person} via {via}" if via else str(person)
        return str(self.attributes.get("userName") or self.attributes.get("login") or self.principal_id)


VIA = {"slack": "Slack", "twilio": "SMS", "github": "GitHub", "api-key": "the API"}
"""The channel a principal answers through, in words, by authenticator (an operator's is not said: the CLI or a key)."""


def channel_word(principal: Principal) -> str | None:
    """"Slack", "SMS", "WhatsApp", "GitHub", "the API", or None (an operator, the app)."""
    if principal.principal_id.startswith("twilio:whatsapp:"):
        return "WhatsApp"
    return VIA.get(principal.authenticator)


APP_PRINCIPAL = Principal(authenticator="app", issuer="hitl", principal_type="runtime", principal_id="app")
APPROVED_ON_TIMEOUT = "approved on timeout"
TIMEOUT_PRINCIPAL = APP_PRINCIPAL.model_copy(update={"attributes": {"reason": APPROVED_ON_TIMEOUT}})
"""Who approves a request whose `on_timeout` is `approve` when it expires: the app, never a person."""


def app_reason(principal: Principal | None) -> str | None:
    """Why the app settled something (a policy's verdict, "approved on timeout"); None when a person did."""
    if principal is None or principal.authenticator != APP_PRINCIPAL.authenticator:
        return None
    reason = principal.attributes.get("reason")
    return str(reason) if reason else None


def operator_principal(name: str) -> Principal:
    """The operator: someone with database access (the CLI), allowed to settle any request by default."""
    return Principal(authenticator="operator", issuer="hitl", principal_type="user", principal_id=name)


Role = Literal["operator", "user", "agent"]
"""What an API key may do (docs/access.md): everything, its own sessions and the requests it is asked, or
(an agent's) create sessions and see those."""
ROLES: tuple[Role, ...] = ("operator", "user", "agent")


def api_key_principal(principal_id: str, role: Role = "user") -> Principal:
    """Who an API key of `role` acts as: an operator key as an operator (the CLI's kind, so response
    policies and cancel treat it as one), a user or agent key as an api-key principal of that type."""
    if role == "operator":
        return operator_principal(principal_id)
    return Principal(authenticator="api-key", issuer="hitl", principal_type=role, principal_id=principal_id)


def principal_or_none(data: dict[str, Any] | None) -> Principal | None:
    return Principal.model_validate(data) if data else None


class Option(WireModel):
    id: str
    label: str
    description: str | None = None
    style: Literal["primary", "danger", "default"] | None = None


class ToolCallAction(WireModel):
    kind: Literal["tool-call"] = "tool-call"
    call_id: str
    tool_name: str
    input: dict[str, Any] = Field(description="the input proposed (an edited approval's response holds the input "
                                              "approved)")
    input_schema: dict[str, Any] | None = Field(None, description="an editable request's: the JSON Schema of the "
                                                                  "input it may be approved with")


RequestKind = Literal["tool-approval", "question", "session-limit"]


class Approver(WireModel):
    """One person counted toward a quorum: how messages name them, and the principal they approved as."""

    name: str
    principal: Principal


class Approvals(WireModel):
    """A quorum's progress (engine/answers/quorum.py): `have` distinct people approved, of the `need` it takes."""

    have: int
    need: int
    by: list[Approver] = Field(description="who approved, one per person, first first")

    @property
    def progress(self) -> str:
        """`1 of 2 approvals: Alice Ng`."""
        names = ", ".join(approver.name for approver in self.by)
        return f"{self.have} of {self.need} approvals" + (f": {names}" if names else "")


class InputRequestOut(WireModel):
    request_id: str
    session_id: str
    turn_id: str | None = Field(description="null for an external request (POST /api/requests): no turn waits on it")
    kind: RequestKind
    prompt: str
    action: ToolCallAction | None
    editable: bool = Field(False, description="it may be approved with another input, which must fit "
                                              "`action.inputSchema`: `{optionId: \"approve\", input}`")
    options: list[Option]
    allow_freeform: bool
    display: Literal["confirmation", "select", "text"]
    requested_by: Principal | None
    created_at: datetime
    expires_at: datetime | None
    status: Literal["pending", "resolved"]
    outcome: str | None
    response: dict[str, Any] | None = None
    responder: Principal | None = None
    resolved_at: datetime | None = None
    on_timeout: Literal["deny", "approve", "dismiss"] | None = None
    """What expiry means (None: the request does not expire); `approve` is answered by the app."""
    reminded: int = 0
    """How many reminders went out."""
    escalated_at: datetime | None = None
    approvals: Approvals | None = Field(None, description="a request that takes more than one approver: who "
                                                          "approved so far, of how many (null otherwise)")


EDITED_INPUT = "an editable request's approve only: the whole input the call runs with instead of the proposed one"


class InputResponse(StrictWireModel):
    """One answer to one request: an option, a text, or both (a deny with a note); an approve of an editable
    request may carry the input approved."""

    request_id: str = Field(min_length=1)
    option_id: str | None = None
    text: str | None = None
    input: dict[str, Any] | None = Field(None, description=EDITED_INPUT)


class ResponseBody(StrictWireModel):
    """The body of PATCH /api/requests/<id>: an InputResponse without its request id."""

    option_id: str | None = None
    text: str | None = None
    input: dict[str, Any] | None = Field(None, description=EDITED_INPUT)
