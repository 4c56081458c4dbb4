"""GET /api/sessions/<id> beyond a page of turns: the latest 100, and `before` for the earlier ones."""

from __future__ import annotations

from engine.defaults import HISTORY_TURNS
from engine.protocol import api_key_principal
from engine.turns.sessions import open_session
from tests.conftest import Stack
from tests.support.history import add_turns

ALICE = api_key_principal("alice")


def test_a_long_history_comes_a_page_of_turns_at_a_time(stack: Stack) -> None:
    session_id = open_session(stack.rt, ALICE).session_id
    ids = add_turns(stack.rt.db, session_id, HISTORY_TURNS + 1, ALICE)
    client = stack.client("alice")

    latest = client.get(f"/api/sessions/{session_id}").get_json()

    assert [t["id"] for t in latest["turns"]] == ids[1:]  # the latest 100, oldest first
    assert latest["next"] == ids[1]
    last = latest["turns"][-1]
    assert (last["seq"], last["input"], last["result"]) == (101, "question 101", "answer 101")
    assert [m["content"] for m in last["messages"]] == ["question 101", "answer 101"]
    assert [r["status"] for r in last["runs"]] == ["succeeded"]

    earlier = client.get(f"/api/sessions/{session_id}", query_string={"before": latest["next"]}).get_json()

    assert [t["id"] for t in earlier["turns"]] == ids[:1]
    assert [m["content"] for m in earlier["turns"][0]["messages"]] == ["question 1", "answer 1"]
    assert earlier["next"] is None
    assert client.get(f"/api/sessions/{session_id}", query_string={"before": ids[0]}).get_json()["turns"] == []


def test_a_short_history_is_one_page(stack: Stack) -> None:
    session_id = open_session(stack.rt, ALICE).session_id
    ids = add_turns(stack.rt.db, session_id, HISTORY_TURNS, ALICE)

    history = stack.client("alice").get(f"/api/sessions/{session_id}").get_json()

    assert [t["id"] for t in history["turns"]] == ids
    assert history["next"] is None


def test_a_cursor_that_is_no_turn_of_the_session_is_a_400(stack: Stack) -> None:
    session_id = open_session(stack.rt, ALICE).session_id
    add_turns(stack.rt.db, session_id, 1, ALICE)
    elsewhere = open_session(stack.rt, ALICE).session_id
    [other_turn] = add_turns(stack.rt.db, elsewhere, 1, ALICE)
    client = stack.client("alice")

    for before in (other_turn, "turn_nope"):
        response = client.get(f"/api/sessions/{session_id}", query_string={"before": before})

        assert response.status_code == 400, response.get_data(as_text=True)
        error = response.get_json()["error"]
        assert (error["code"], error["details"]) == ("invalid_query", {"parameter": "before"})
        assert error["message"] == "`before` names no turn of this session"
