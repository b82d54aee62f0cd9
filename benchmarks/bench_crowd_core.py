"""Benchmark: the crowd decision core alone, at 1,000 / 10,000 / 100,000 workers.

Run on demand (not part of the test suite):

    .venv/bin/python benchmarks/bench_crowd_core.py [--jobs 2000]

No runtime: every worker joins and the first job's broadcast reaches them all
(timed apart: both grow with the fleet, as they must); then jobs of 5 inputs
x 3 stages keep arriving while up to 50 tasks run, a task completes when it is
the oldest running one, and every tenth completing worker leaves and comes
back (holding nothing). It reports the steady state's decisions per wall
second: if assignment, the broadcast and the JIT loads never scan the fleet,
the rate stays flat as the fleet grows.
"""

from __future__ import annotations

import argparse
import time
from collections import deque
from itertools import count

import numpy as np

from edgetwin.models.crowd.core import CrowdCore, Order, Run
from edgetwin.models.crowd.events import Decision
from edgetwin.models.crowd.table import Stage
from edgetwin.models.crowd.workers import Facts
from edgetwin.policies.scheduling import make_scheduler

STAGES = [Stage(f"cell_{c}", f"cell_{c}", 40.0) for c in "abc"]


def run(workers: int, jobs: int) -> tuple[float, float, int]:
    """Seconds to enrol and broadcast, seconds of the steady state, its decisions."""
    decisions = [0]

    def tally(_d: Decision) -> None:
        decisions[0] += 1

    facts = {
        f"w{k}": Facts(frozenset(), 1000.0 + k % 7, 50.0 + k % 50, k % 3 == 0)
        for k in range(workers)
    }
    core = CrowdCore(facts.__getitem__, tally)
    scheduler, rng = make_scheduler("affinity"), np.random.default_rng(0)
    running: deque[str] = deque()

    def submit(now_ms: float) -> list[Order]:
        return core.submit("j", STAGES, 5, "streaming", scheduler, rng, now_ms)[1]

    start = time.perf_counter()
    for name in facts:
        core.join(name)
    orders = submit(0.0)
    setup_s = time.perf_counter() - start
    decisions[0] = 0
    completions = count()
    now_ms, submitted = 1.0, 1
    start = time.perf_counter()
    while True:
        running.extend(o.worker for o in orders if isinstance(o, Run))
        if submitted < jobs and len(running) < 50:
            orders, submitted = submit(now_ms), submitted + 1
        elif running:
            worker = running.popleft()
            core.complete(worker, now_ms)
            if next(completions) % 10 == 0:
                core.leave(worker)
                core.join(worker)
            orders = core.dispatch(now_ms)
        else:
            break
        now_ms += 1.0
    return setup_s, time.perf_counter() - start, decisions[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=2000)
    args = parser.parse_args()
    for workers in (1_000, 10_000, 100_000):
        setup_s, wall_s, decided = run(workers, args.jobs)
        print(
            f"{workers:>7,} workers: enrol + first broadcast {setup_s:.2f} s; then "
            f"{args.jobs:,} jobs, {decided:,} decisions in {wall_s:.2f} s "
            f"({decided / wall_s:,.0f} decisions/s)"
        )


if __name__ == "__main__":
    main()
