"""Request policies: status normalisation, sync/async calling, never/always/once and the auto() reviewer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import responses

from engine.llm import ModelError, ModelReply, OpenAIChatModel, ScriptedModel
from engine.policies import (
    REVIEW_INSTRUCTIONS,
    ApprovalContext,
    SessionInfo,
    Verdict,
    always,
    auto,
    call_policy,
    never,
    once,
    to_verdict,
)
from engine.protocol import Principal

ALICE = Principal(authenticator="slack", issuer="T123", principal_type="user", principal_id="U456")
SESSION = SessionInfo(
    id="ses_1", agent="demo", channel="slack", address="slack:C1:1700000000.1", initiator=ALICE
)


def make_ctx(
    tool_name: str = "send_email",
    tool_input: dict[str, Any] | None = None,
    approved_keys: frozenset[str] = frozenset(),
    approval_key: str | None = None,
    call_id: str = "call_1",
) -> ApprovalContext:
    return ApprovalContext(
        session=SESSION,
        tool_name=tool_name,
        tool_input=tool_input if tool_input is not None else {"to": "bob@example.com", "subject": "hi"},
        call_id=call_id,
        approval_key=approval_key or tool_name,
        grants=lambda: approved_keys,
    )


# --- to_verdict ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (True, Verdict("user-approval")),
        (False, Verdict("not-applicable")),
        (None, Verdict("not-applicable")),
        ("not-applicable", Verdict("not-applicable")),
        ("user-approval", Verdict("user-approval")),
        ("approved", Verdict("approved")),
        ("denied", Verdict("denied")),
        ({"type": "approved"}, Verdict("approved")),
        ({"type": "approved", "reason": "read-only"}, Verdict("approved", "read-only")),
        ({"type": "denied", "reason": "deletes data"}, Verdict("denied", "deletes data")),
        ({"type": "denied", "reason": None}, Verdict("denied")),
        ({"type": "denied", "reason": 42}, Verdict("denied", "42")),
    ],
)
def test_to_verdict_normalises_every_status_form(status: Any, expected: Verdict) -> None:
    assert to_verdict(status) == expected


@pytest.mark.parametrize(
    "status",
    [
        "yes",
        "APPROVED",
        "",
        1,
        0,
        [],
        {},
        {"type": "user-approval"},
        {"type": "maybe", "reason": "?"},
        {"reason": "no type"},
        Verdict("approved"),
    ],
)
def test_to_verdict_rejects_anything_else(status: Any) -> None:
    with pytest.raises(ValueError, match="not a status"):
        to_verdict(status)


# --- call_policy ---------------------------------------------------------------------------------------


def test_call_policy_with_a_sync_callable() -> None:
    seen: list[ApprovalContext] = []

    def policy(ctx: ApprovalContext) -> str:
        seen.append(ctx)
        return "denied"

    ctx = make_ctx()
    assert call_policy(policy, ctx) == "denied"
    assert seen == [ctx]


def test_call_policy_with_an_async_callable() -> None:
    seen: list[ApprovalContext] = []

    async def policy(ctx: ApprovalContext) -> dict[str, str]:
        seen.append(ctx)
        return {"type": "approved", "reason": f"async ok for {ctx.tool_name}"}

    ctx = make_ctx(tool_name="lookup")
    result = call_policy(policy, ctx)

    assert result == {"type": "approved", "reason": "async ok for lookup"}
    assert seen == [ctx]
    assert to_verdict(result) == Verdict("approved", "async ok for lookup")


def test_call_policy_propagates_an_async_exception() -> None:
    async def policy(ctx: ApprovalContext) -> str:
        raise RuntimeError("policy broke")

    with pytest.raises(RuntimeError, match="policy broke"):
        call_policy(policy, make_ctx())


# --- never / always / once -----------------------------------------------------------------------------


def test_never_needs_no_approval() -> None:
    assert never()(make_ctx()) == "not-applicable"
    assert never()(make_ctx(approved_keys=frozenset({"send_email"}))) == "not-applicable"


def test_always_needs_a_person_even_after_a_grant() -> None:
    assert always()(make_ctx()) == "user-approval"
    assert always()(make_ctx(approved_keys=frozenset({"send_email"}))) == "user-approval"


def test_once_asks_until_the_key_is_granted() -> None:
    assert once()(make_ctx(approved_keys=frozenset())) == "user-approval"
    assert once()(make_ctx(approved_keys=frozenset({"other_tool"}))) == "user-approval"
    assert once()(make_ctx(approved_keys=frozenset({"send_email", "other_tool"}))) == "approved"


def test_once_is_keyed_by_the_approval_key_not_the_tool_name() -> None:
    by_name_only = make_ctx(
        tool_name="send_email", approval_key="email", approved_keys=frozenset({"send_email"})
    )
    by_key = make_ctx(tool_name="send_email", approval_key="email", approved_keys=frozenset({"email"}))

    assert once()(by_name_only) == "user-approval"
    assert once()(by_key) == "approved"


# --- auto() with a ScriptedModel reviewer --------------------------------------------------------------


def reviewer(text: str | None, seen: list[list[dict[str, Any]]] | None = None) -> ScriptedModel:
    def script(messages: list[dict[str, Any]]) -> ModelReply:
        if seen is not None:
            seen.append(messages)
        return ModelReply(text=text)

    return ScriptedModel(script)


def test_auto_clear_is_approved_with_the_reason() -> None:
    policy = auto(reviewer(json.dumps({"verdict": "clear", "reason": "only reads the calendar"})))

    status = policy(make_ctx())

    assert status == {"type": "approved", "reason": "only reads the calendar"}
    assert to_verdict(status) == Verdict("approved", "only reads the calendar")


def test_auto_caution_asks_a_person() -> None:
    policy = auto(reviewer('{"verdict": "caution", "reason": "sends mail outside the company"}'))

    assert policy(make_ctx()) == "user-approval"


def test_auto_deny_is_denied_with_the_reason() -> None:
    policy = auto(reviewer('{"verdict": "deny", "reason": "drops the production table"}'))

    status = policy(make_ctx(tool_name="run_sql", tool_input={"sql": "DROP TABLE users"}))

    assert status == {"type": "denied", "reason": "drops the production table"}
    assert to_verdict(status) == Verdict("denied", "drops the production table")


def test_auto_reviewer_exception_asks_a_person() -> None:
    def broken(messages: list[dict[str, Any]]) -> ModelReply:
        raise ModelError("endpoint down")

    assert auto(ScriptedModel(broken))(make_ctx()) == "user-approval"


@pytest.mark.parametrize(
    "text",
    [
        "Looks fine to me!",
        "clear",
        "",
        None,
        '{"verdict": "clear"',
        '{"reason": "no verdict key"}',
        '["clear"]',
        '"clear"',
        '{"verdict": "maybe", "reason": "unknown verdict"}',
    ],
)
def test_auto_unparsable_verdict_asks_a_person(text: str | None) -> None:
    assert auto(reviewer(text))(make_ctx()) == "user-approval"


def test_auto_sends_instructions_criteria_and_the_call() -> None:
    seen: list[list[dict[str, Any]]] = []
    policy = auto(
        reviewer('{"verdict": "clear", "reason": "fine"}', seen),
        instructions="Be strict about money.",
        criteria=["No transfers above 100 EUR", "Never to new payees"],
    )

    policy(make_ctx(tool_name="transfer", tool_input={"amount": 50, "to": "acct-9"}))

    [messages] = seen
    assert [m["role"] for m in messages] == ["system", "user"]
    system = messages[0]["content"]
    assert REVIEW_INSTRUCTIONS in system
    assert "Be strict about money." in system
    assert "- No transfers above 100 EUR" in system
    assert "- Never to new payees" in system
    assert json.loads(messages[1]["content"]) == {"tool": "transfer", "input": {"amount": 50, "to": "acct-9"}}


# --- auto() with an OpenAIChatModel reviewer over a mocked endpoint ------------------------------------


REVIEW_URL = "http://reviewer.test/v1/chat/completions"


@pytest.fixture
def mock() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=True) as rsps:
        yield rsps


def test_auto_with_openai_reviewer(mock: responses.RequestsMock) -> None:
    verdict = json.dumps({"verdict": "deny", "reason": "wipes the home directory"})
    mock.post(
        REVIEW_URL,
        json={"choices": [{"index": 0, "message": {"role": "assistant", "content": verdict}}]},
    )
    policy = auto(
        OpenAIChatModel("http://reviewer.test/v1", "sk-review", "reviewer-model"),
        instructions="You guard a developer laptop.",
        criteria=["Deny anything that deletes files outside /tmp"],
    )

    status = policy(make_ctx(tool_name="shell", tool_input={"command": "rm -rf ~"}))

    assert status == {"type": "denied", "reason": "wipes the home directory"}
    assert len(mock.calls) == 1
    body = json.loads(mock.calls[0].request.body)
    assert body["model"] == "reviewer-model"
    assert "tools" not in body
    system, user = body["messages"]
    assert system["role"] == "system"
    assert "You guard a developer laptop." in system["content"]
    assert "- Deny anything that deletes files outside /tmp" in system["content"]
    assert user["role"] == "user"
    assert json.loads(user["content"]) == {"tool": "shell", "input": {"command": "rm -rf ~"}}
    assert mock.calls[0].request.headers["Authorization"] == "Bearer sk-review"


def test_auto_with_openai_reviewer_that_fails_asks_a_person(mock: responses.RequestsMock) -> None:
    mock.post(REVIEW_URL, status=503, body="unavailable")
    policy = auto(OpenAIChatModel("http://reviewer.test/v1", None, "reviewer-model"))

    assert policy(make_ctx()) == "user-approval"
