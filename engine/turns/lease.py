"""The running turn's lease: renewed while its runner lives, so sweep() can tell a dead worker's turn."""

from __future__ import annotations

import logging
import threading

from sqlalchemy import update

from engine.jobs.runtime import Runtime
from engine.store.statuses import TurnStatus
from engine.store.tables import Turn

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Renews the running turn's lease so sweep() does not take it for a dead worker's."""

    def __init__(self, rt: Runtime, turn_id: str, run_id: str) -> None:
        self.rt, self.turn_id, self.run_id = rt, turn_id, run_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"lease-{turn_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.rt.lease_seconds / 3):
            try:
                with self.rt.transaction() as db:
                    db.execute(update(Turn).where(Turn.id == self.turn_id, Turn.status == TurnStatus.RUNNING)
                               .values(lease_until=self.rt.lease_until()))
            except Exception:  # a missed renewal is retried; it must not kill the turn
                log.warning("turn %s: lease renewal failed", self.turn_id, exc_info=True)
