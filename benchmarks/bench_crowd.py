"""Benchmark: the crowd twin at city scale, next to plain SimPy on the same machine.

Run on demand (not part of the test suite):

    .venv/bin/python benchmarks/bench_crowd.py [--hours 24] [--profile]
    .venv/bin/python benchmarks/bench_crowd.py --fleet 1000 10000 100000 [--repeat 3]

Times one run of ``scenarios/crowd_city.yaml`` (1,000 phones with churn, a
pipeline job every 30 s, 24 simulated hours) and reports the events the twin
scheduled per wall second, then a trivial SimPy loop (one process yielding
timeouts) in the same process as the baseline. ``--profile`` prints the
hottest functions of the crowd run. ``--floor`` also prints what plain SimPy
itself reaches with events already pending (a heap as long as the crowd
run's: every push and pop then sifts through it), the crowd run's mean
number of pending events, and the events per second of its tasks' event
structure alone (a process, two transfers and an inference per task, on that
heap, with none of the twin's logic). ``--fleet`` runs the scenario instead at
each fleet size, each run in a fresh process, and prints its wall seconds
(profiles, fleet, simulation and rows), events per second and peak RSS.
"""

from __future__ import annotations

import argparse
import cProfile
import multiprocessing
import pstats
import resource
import time
from collections.abc import Generator
from pathlib import Path
from statistics import fmean, median

import numpy as np
import simpy

from edgetwin.configuration import crowd_runs
from edgetwin.scenario import load_scenario
from edgetwin.sim.crowd.runner import CrowdOutcome, prepare_crowd, simulate_crowd

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios/crowd_city.yaml"
TARGET_S = 60.0


def run_city(
    hours: float, profile: bool, fleet_size: int | None = None
) -> tuple[float, CrowdOutcome]:
    """Wall seconds and outcome of one crowd_city run over ``hours`` simulated hours."""
    overrides = [f"crowd.horizon_s={hours * 3600:g}"]
    if fleet_size is not None:
        overrides.append(f"crowd.fleet_size={fleet_size}")
    scenario = load_scenario(SCENARIO, overrides)
    start = time.perf_counter()
    setup = prepare_crowd(scenario, SCENARIO)
    run = crowd_runs(scenario)[0]
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    outcome = simulate_crowd(scenario, setup, run)
    if profiler is not None:
        profiler.disable()
    wall_s = time.perf_counter() - start
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(20)
    return wall_s, outcome


def measure_fleet(fleet_size: int, hours: float) -> tuple[float, int, float]:
    """Wall seconds, events scheduled and this process's peak RSS (MB) of one run."""
    wall_s, outcome = run_city(hours, False, fleet_size)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return wall_s, outcome.events_scheduled, peak_mb


def fleet_series(sizes: list[int], hours: float, repeat: int) -> None:
    """Each fleet size ``repeat`` times, every run in a fresh process (its own peak RSS)."""
    context = multiprocessing.get_context("spawn")
    print(f"crowd_city, {hours:g} h simulated, {repeat} run(s) per fleet size")
    for size in sizes:
        runs = []
        for _ in range(repeat):
            with context.Pool(1) as pool:
                runs.append(pool.apply(measure_fleet, (size, hours)))
        walls = [wall for wall, _events, _peak in runs]
        events = runs[0][1]
        rates = [events / wall for wall in walls]
        peaks = [peak for _wall, _events, peak in runs]
        print(
            f"  {size:>7,} phones: wall {_spread(walls, '.1f')} s, {events:,} events, "
            f"{_spread(rates, ',.0f')} events/s, peak RSS {_spread(peaks, ',.0f')} MB"
        )


def _spread(values: list[float], spec: str) -> str:
    if len(values) == 1:
        return format(values[0], spec)
    low, mid, high = min(values), median(values), max(values)
    return f"{format(mid, spec)} (min {format(low, spec)}, max {format(high, spec)})"


def plain_simpy_events_per_s(events: int = 1_000_000, pending: int = 0) -> float:
    """Events per wall second of one SimPy process yielding ``events`` timeouts, with
    ``pending`` other events waiting far in the future (in the heap all along)."""
    env = simpy.Environment()
    for k in range(pending):
        env.timeout(1e15 + k)

    def loop() -> Generator[simpy.Event, object, None]:
        for _ in range(events):
            yield env.timeout(1)

    process = env.process(loop())
    start = time.perf_counter()
    env.run(until=process)
    return events / (time.perf_counter() - start)


def task_pattern_events_per_s(tasks: int, pending: int, seed: int = 0) -> float:
    """Events per wall second of a crowd run's task events with none of the twin's logic:
    each task a process that receives its input (a latency timeout, then a done event
    that a channel's wake-up timer triggers), infers (a timeout) and sends its result
    the same way, ``tasks`` of them arriving one after another, ``pending`` other events
    waiting in the heap all along. The floor of the twin's event structure."""
    env = simpy.Environment()
    for k in range(pending):
        env.timeout(1e15 + k)
    draws = np.random.default_rng(seed)
    latency_ms, link_ms, infer_ms = (draws.uniform(1, 100, tasks) for _ in range(3))

    def transfer(k: int) -> Generator[simpy.Event, object, None]:
        yield env.timeout(latency_ms[k])
        done = env.event()

        def wake(_wakeup: simpy.Event) -> None:
            done.succeed()

        env.timeout(link_ms[k]).callbacks.append(wake)
        yield done

    def task(k: int) -> Generator[simpy.Event, object, None]:
        yield from transfer(k)
        yield env.timeout(infer_ms[k])
        yield from transfer(k)

    def arrivals() -> Generator[simpy.Event, object, None]:
        for k in range(tasks):
            env.process(task(k))
            yield env.timeout(50)

    process = env.process(arrivals())
    start = time.perf_counter()
    env.run(until=process)
    env.run(until=env.now + 1e6)  # the last tasks finish
    return next(env._eid) / (time.perf_counter() - start)


def mean_pending_events(hours: float) -> float:
    """Mean length of SimPy's event heap over one crowd_city run (an untimed pass)."""
    lengths: list[int] = []
    step = simpy.Environment.step

    def counting_step(env: simpy.Environment) -> None:
        lengths.append(len(env._queue))
        step(env)

    simpy.Environment.step = counting_step  # type: ignore[method-assign,assignment]
    try:
        run_city(hours, False)
    finally:
        simpy.Environment.step = step  # type: ignore[method-assign]
    return fmean(lengths)


def print_floor(hours: float, tasks: int) -> None:
    pending = mean_pending_events(hours)
    print(f"crowd_city run: {pending:,.0f} events pending on average")
    rate = task_pattern_events_per_s(tasks, round(pending))
    print(f"its {tasks:,} tasks' events, no twin logic, that heap: {rate:,.0f} events/s")
    for count in (1_000, 4_000, 16_000, 64_000):
        rate = plain_simpy_events_per_s(pending=count)
        print(f"plain SimPy timeout loop, {count:,} events pending: {rate:,.0f} events/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--floor", action="store_true", help="plain SimPy with a full heap")
    parser.add_argument("--fleet", type=int, nargs="+", metavar="PHONES")
    parser.add_argument("--repeat", type=int, default=1, help="runs per fleet size")
    args = parser.parse_args()
    if args.fleet:
        fleet_series(args.fleet, args.hours, args.repeat)
        return
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
    if args.floor:
        print_floor(args.hours, sum(len(row) for job in outcome.jobs for row in job.core.tasks))


if __name__ == "__main__":
    main()
