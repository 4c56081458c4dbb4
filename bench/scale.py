"""Scenario 3, scale: settle+resume latency of one request with 1k, 10k and 100k parked turns in the database,
side by side with a control deployment that holds 1k parked turns throughout.

The parked turns are seeded in bulk, level after level. The control, a second deployment of the same shape on a
database of its own, holds the smallest level's count all along. At each level a sample of each deployment's
turns is answered one at a time, the two deployments alternately (`PATCH /api/requests/<id>`, closed loop,
nothing else in flight): the response time is the settle latency, and the turn's `turn.completed` `at` minus the
send time the settle+resume latency. Answered alternately, both see the machine at the same moments: its speed,
which swings over the minutes the seeding takes, cancels out of their ratio. The workers of both sweep on their
usual schedule meanwhile, over everything parked.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from .answer import approve
from .config import Bench
from .measure import completed_at, percentiles, send_one
from .seed import Cloner, Parked, park_template
from .stack import Deployment

SAMPLE_TIMEOUT = 60.0
"""A sample not completed by then counts this long (a lower bound), and as `incomplete`."""


@dataclass
class Side:
    """One deployment's parked turns: seeded up to a level, sampled (an answered turn leaves the pool)."""

    deployment: Deployment
    cloner: Cloner
    pool: list[Parked]

    @classmethod
    def park(cls, deployment: Deployment) -> Side:
        template = park_template(deployment.target)
        return cls(deployment, Cloner(deployment.target, template), [template])

    def fill(self, level: int) -> None:
        """Seed until `level` turns are parked."""
        self.pool += self.cloner.clone(level - len(self.pool))

    def take(self, count: int) -> list[Parked]:
        sample = random.sample(self.pool, count)
        taken = set(sample)
        self.pool = [p for p in self.pool if p not in taken]
        return sample


@dataclass
class Latencies:
    settle: list[float] = field(default_factory=list)
    settle_resume: list[float] = field(default_factory=list)
    errors: int = 0
    incomplete: int = 0

    def answer(self, deployment: Deployment, parked: Parked) -> None:
        """Answer one parked turn and wait for it to complete."""
        sent = send_one(deployment.port, approve(parked))
        done = completed_at(deployment.target, [parked], SAMPLE_TIMEOUT)
        self.errors += sent.status != 200
        self.incomplete += parked.turn_id not in done
        self.settle.append(sent.ms)
        self.settle_resume.append((done.get(parked.turn_id, time.time()) - sent.at) * 1000)

    def summary(self) -> dict[str, Any]:
        return {"settle_ms": percentiles(self.settle), "settle_resume_ms": percentiles(self.settle_resume),
                "errors": self.errors, "incomplete": self.incomplete}


def sample_latencies(measured: Side, control: Side, count: int) -> dict[str, Any]:
    """Answer `count` turns of each side one at a time, alternately (the side that goes first swaps every
    round), each completed before the next is sent."""
    ours, theirs = Latencies(), Latencies()
    for n, (mine, reference) in enumerate(zip(measured.take(count), control.take(count), strict=True)):
        rounds = [(ours, measured.deployment, mine), (theirs, control.deployment, reference)]
        for latencies, deployment, parked in rounds if n % 2 else rounds[::-1]:
            latencies.answer(deployment, parked)
    return {**ours.summary(), "control": theirs.summary()}


def run(bench: Bench) -> dict[str, Any]:
    sizes = bench.sizes
    control_parked = sizes.scale_levels[0]
    deployment = bench.fresh_deployment()
    with bench.control() as reference:
        measured, control = Side.park(deployment), Side.park(reference)
        levels: dict[str, Any] = {}
        for level in sizes.scale_levels:
            measured.fill(level)
            control.fill(control_parked)
            levels[str(level)] = sample_latencies(measured, control, sizes.scale_samples)
    return {"samples": sizes.scale_samples, "control_parked": control_parked, "levels": levels}
