"""`hitl worker` stops promptly: RQ's command listener must not hold a warm shutdown for its one-minute wait."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from redis import Redis
from redis.client import PubSub
from rq import Queue, SimpleWorker
from rq.worker import BaseWorker

from gateway.rqworker import WORKER_CLASSES

PROMPT = 5.0
"""Seconds: far below the listener's 60 s wait, far above a round trip to Redis."""


def unsubscribe_time(worker_class: type[BaseWorker], redis_url: str, monkeypatch: pytest.MonkeyPatch) -> float:
    """How long `unsubscribe()` takes when the listener reads the UNSUBSCRIBE reply before the worker goes on
    (the order a busy machine can give), up to 2 * PROMPT."""
    original = PubSub.unsubscribe

    def reply_read_first(self: PubSub, *args: Any, **kwargs: Any) -> Any:
        sent = original(self, *args, **kwargs)
        time.sleep(0.5)  # the listener thread reads the reply meanwhile and, unless told to stop, waits again
        return sent

    monkeypatch.setattr(PubSub, "unsubscribe", reply_read_first)
    connection = Redis.from_url(redis_url)
    worker = worker_class([Queue(f"test-{uuid.uuid4().hex[:12]}", connection=connection)], connection=connection)
    worker.subscribe()
    time.sleep(0.2)  # the listener is waiting for a message
    started = time.monotonic()
    stopping = threading.Thread(target=worker.unsubscribe, daemon=True)
    stopping.start()
    stopping.join(2 * PROMPT)
    connection.close()
    return time.monotonic() - started


@pytest.mark.parametrize("name", sorted(WORKER_CLASSES))
def test_the_worker_stops_listening_at_once(name: str, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert unsubscribe_time(WORKER_CLASSES[name], redis_url, monkeypatch) < PROMPT


def test_rqs_own_worker_waits_out_its_listener(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the classes above fix (if RQ fixes it, they can go)."""
    assert unsubscribe_time(SimpleWorker, redis_url, monkeypatch) >= 2 * PROMPT
