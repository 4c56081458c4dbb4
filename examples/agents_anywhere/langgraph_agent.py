"""A LangGraph graph whose nodes ask people through the gateway: a question, then a tool approval.

    pip install 'hitl-gateway[langgraph]'
    HITL_URL=http://127.0.0.1:8000 HITL_API_KEY=<an agent's key> python -m examples.agents_anywhere.langgraph_agent

The thread is kept by LangGraph's PostgresSaver when CHECKPOINT_DATABASE_URL names a PostgreSQL database
(`postgresql://user@host/db`), else in memory. Run it again with the same THREAD_ID after stopping it while it
waits: it picks the thread up where it parked, and nobody is asked twice.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from gateway.client import HitlClient
from gateway.langgraph import HitlGraphRunner, ask_people


class Ticket(TypedDict, total=False):
    customer: str
    plan: str
    outcome: str


def pick_plan(state: Ticket) -> Ticket:
    answer = ask_people(f"Which plan should {state['customer']} move to?", options=["Basic", "Pro"])
    return {"plan": answer.label or answer.text or ""}


def refund(state: Ticket) -> Ticket:
    call = {"toolName": "refund_charge", "input": {"customer": state["customer"], "amount": 20.0}}
    approval = ask_people("Refund the difference?", kind="tool-approval", action=call)
    if not approval.approved:
        return {"outcome": f"refund denied: {approval.note or 'no reason given'}"}
    return {"outcome": f"refunded 20.00 to {state['customer']}"}  # the real side effect goes here


def build(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    graph = StateGraph(Ticket)
    graph.add_node("pick_plan", pick_plan)
    graph.add_node("refund", refund)
    graph.add_edge(START, "pick_plan")
    graph.add_edge("pick_plan", "refund")
    graph.add_edge("refund", END)
    return graph.compile(checkpointer=checkpointer)


def run(hitl: HitlClient, checkpointer: BaseCheckpointSaver[Any], thread_id: str, customer: str = "c_1001") -> str:
    """Run the ticket's thread to its end, asking people on the way; what happened, in words."""
    runner = HitlGraphRunner(build(checkpointer), hitl)
    ticket = runner.invoke({"customer": customer}, {"configurable": {"thread_id": thread_id}}, timeout=3600)
    return f"plan {ticket['plan']}; {ticket['outcome']}"


@contextmanager
def checkpointer() -> Iterator[BaseCheckpointSaver[Any]]:
    url = os.environ.get("CHECKPOINT_DATABASE_URL")
    if not url:
        yield InMemorySaver()
        return
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()  # its tables, once
        yield saver


def main() -> None:
    with checkpointer() as saver:
        print(run(HitlClient(), saver, os.environ.get("THREAD_ID", "ticket-1001")))


if __name__ == "__main__":
    main()
