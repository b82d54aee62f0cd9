"""Benchmark: the crowd twin at city scale, next to plain SimPy on the same machine.

Run on demand (not part of the test suite):

    .venv/bin/python benchmarks/bench_crowd.py [--hours 24] [--profile]

Times one run of ``scenarios/crowd_city.yaml`` (1,000 phones with churn, a
pipeline job every 30 s, 24 simulated hours) and reports the events the twin
scheduled per wall second, then a trivial SimPy loop (one process yielding
timeouts) in the same process as the baseline. ``--profile`` prints the
hottest functions of the crowd run.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from collections.abc import Generator
from pathlib import Path
from statistics import fmean

import simpy

from edgetwin.scenario import load_scenario
from edgetwin.sim.crowd.runner import CrowdOutcome, crowd_runs, prepare_crowd, simulate_crowd

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios/crowd_city.yaml"
TARGET_S = 60.0


def run_city(hours: float, profile: bool) -> tuple[float, CrowdOutcome]:
    """Wall seconds and outcome of one crowd_city run over ``hours`` simulated hours."""
    scenario = load_scenario(SCENARIO, [f"crowd.horizon_s={hours * 3600:g}"])
    setup = prepare_crowd(scenario, SCENARIO)
    run = crowd_runs(scenario)[0]
    profiler = cProfile.Profile() if profile else None
    start = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    outcome = simulate_crowd(scenario, setup, run)
    if profiler is not None:
        profiler.disable()
    wall_s = time.perf_counter() - start
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(20)
    return wall_s, outcome


def plain_simpy_events_per_s(events: int = 1_000_000) -> float:
    """Events per wall second of one SimPy process yielding ``events`` timeouts."""
    env = simpy.Environment()

    def loop() -> Generator[simpy.Event, object, None]:
        for _ in range(events):
            yield env.timeout(1)

    env.process(loop())
    start = time.perf_counter()
    env.run()
    return events / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    wall_s, outcome = run_city(args.hours, args.profile)
    rows = outcome.rows
    ok = [r for r in rows if r.status == "ok"]
    drained = sum(s.battery_empty for s in outcome.phones)
    crowd_rate = outcome.events_scheduled / wall_s
    print(
        f"crowd_city, {len(outcome.phones)} phones, {args.hours:g} h simulated: "
        f"wall {wall_s:.1f} s ({'under' if wall_s < TARGET_S else 'OVER'} {TARGET_S:g} s), "
        f"{outcome.events_scheduled:,} events, {crowd_rate:,.0f} events/s"
    )
    print(
        f"  {len(rows)} jobs ({len(ok)} finished), mean latency "
        f"{fmean(r.total_ms for r in ok) / 1e3:.1f} s, "
        f"{sum(r.tasks_redispatched or 0 for r in rows)} tasks re-dispatched, "
        f"{drained} phones ran out of battery"
    )
    baseline = plain_simpy_events_per_s()
    print(
        f"plain SimPy timeout loop: {baseline:,.0f} events/s "
        f"(the crowd twin runs at {crowd_rate / baseline:.0%} of it)"
    )


if __name__ == "__main__":
    main()
