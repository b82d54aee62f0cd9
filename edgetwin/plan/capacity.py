"""How many phones keep up with a job every T seconds under churn (crowd twin sweeps).

A run (fleet size n, repetition r) submits job k at s_k = first_at + k T until
the horizon; L_k is its latency (submission to result) and f_k = s_k + L_k
(never, for a job unfinished when the run ends). The backlog met by job k
is b_k = #{j < k : f_j > s_k}, the jobs still in the system when it arrives.
The fleet **keeps up** in the run iff

1. every submitted job finished (none left when the run ends, ``drain_s``
   after the horizon),
2. the 95th percentile of L_k (numpy's linear method) is at most the target
   (default T: a job is, as a rule, done before the next one arrives), and
3. the backlog does not grow: a least-squares line through b_k rises by at
   most one job from the first job to the last (``GROWTH_JOBS``; a fleet
   that falls behind piles up jobs in proportion to the run's length).

A fleet size keeps up iff it keeps up in every repetition. The answer is the
smallest swept size from which every larger swept size keeps up too, at each swept
bandwidth of the phones' links.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from edgetwin.availability_spec import ConstantDist
from edgetwin.configuration import crowd_bandwidths
from edgetwin.number_text import counted, exact_text
from edgetwin.plan.questions import CrowdCapacity
from edgetwin.results import ResultRow, as_in_table
from edgetwin.scenario import Scenario

GROWTH_JOBS = 1.0  # tolerated rise of the backlog over a run (one job: noise, not a trend)


def backlog(submitted_s: Sequence[float], finished_s: Sequence[float]) -> list[int]:
    """b_k: earlier jobs not finished when job k arrives (unfinished: ``inf``)."""
    return [
        sum(1 for j in range(k) if finished_s[j] > submitted_s[k]) for k in range(len(submitted_s))
    ]


def backlog_growth(waiting: Sequence[int]) -> float:
    """Rise of a least-squares line through the backlogs, from the first job to the last."""
    if len(waiting) < 2:
        return 0.0
    slope = np.polyfit(np.arange(len(waiting)), waiting, 1)[0]
    return float(slope * (len(waiting) - 1))


def judge_run(
    rows: Sequence[ResultRow], interval_s: float, first_s: float, target_s: float
) -> dict[str, Any]:
    """Whether one run (its jobs' rows, in submission order) keeps up, and why."""
    latency_s = [r.total_ms / 1e3 if r.ok else float("inf") for r in rows]
    submitted = [first_s + k * interval_s for k in range(len(rows))]
    waiting = backlog(submitted, [s + lat for s, lat in zip(submitted, latency_s, strict=True)])
    finished = [lat for lat in latency_s if lat != float("inf")]
    p95_s = as_in_table(float(np.percentile(finished, 95))) if finished else None
    unfinished = len(rows) - len(finished)
    growth = backlog_growth(waiting)
    growing = growth > GROWTH_JOBS
    keeps_up = unfinished == 0 and p95_s is not None and p95_s <= target_s and not growing
    return {
        "rep": rows[0].rep,
        "jobs": len(rows),
        "unfinished": unfinished,
        "p95_s": p95_s,
        "median_s": as_in_table(float(np.median(finished))) if finished else None,
        "max_backlog": max(waiting),
        "backlog_growth_jobs": round(growth, 3),
        "backlog_grows": growing,
        "keeps_up": keeps_up,
    }


def crowd_capacity(
    kind: CrowdCapacity, scenario: Scenario, fleet_sizes: Sequence[int], rows: Sequence[ResultRow]
) -> dict[str, Any]:
    """Per bandwidth and fleet size: each run judged; per bandwidth, the smallest size that
    keeps up for good (``fleets`` and ``smallest_fleet`` at the top are the first
    bandwidth's, as before bandwidths were swept)."""
    crowd = scenario.crowd
    assert crowd is not None and isinstance(crowd.job.interarrival, ConstantDist)
    interval_s = crowd.job.interarrival.value_s
    target_s = kind.target_p95_s or interval_s
    by_bandwidth = []
    for bandwidth_mbps in crowd_bandwidths(scenario):
        fleets = [
            _judge_fleet(
                [r for r in rows if (r.devices, r.bandwidth_mbps) == (size, bandwidth_mbps)],
                size,
                scenario.repetitions,
                interval_s,
                crowd.job.first_at_s,
                target_s,
            )
            for size in fleet_sizes
        ]
        by_bandwidth.append(
            {
                "bandwidth_mbps": bandwidth_mbps,
                "fleets": fleets,
                "smallest_fleet": _smallest(fleets),
            }
        )
    return {
        "interarrival_s": interval_s,
        "target_p95_s": target_s,
        "horizon_s": crowd.horizon_s,
        "strategy": scenario.strategies[0].name,
        "scheduler": crowd.schedulers[0],
        "repetitions": scenario.repetitions,
        "by_bandwidth": by_bandwidth,
        "fleets": by_bandwidth[0]["fleets"],
        "smallest_fleet": by_bandwidth[0]["smallest_fleet"],
    }


def _judge_fleet(
    rows: Sequence[ResultRow],
    size: int,
    repetitions: int,
    interval_s: float,
    first_s: float,
    target_s: float,
) -> dict[str, Any]:
    """One fleet size at one bandwidth: each repetition's run judged."""
    runs = [
        judge_run([r for r in rows if r.rep == rep], interval_s, first_s, target_s)
        for rep in range(repetitions)
    ]
    p95 = [run["p95_s"] for run in runs]
    return {
        "fleet_size": size,
        "keeps_up": all(run["keeps_up"] for run in runs),
        "runs_keeping_up": sum(run["keeps_up"] for run in runs),
        "worst_p95_s": None if None in p95 else max(p95),
        "runs": runs,
    }


def _smallest(fleets: Sequence[dict[str, Any]]) -> int | None:
    """The smallest fleet size from which every larger swept size keeps up too."""
    smallest = None
    for fleet in reversed(fleets):
        if not fleet["keeps_up"]:
            break
        smallest = fleet["fleet_size"]
    return smallest


NONE_KEEPS_UP = (
    "no swept fleet keeps up (sweep larger fleets in axes.fleet_size, or ask less: "
    "question.target_p95_s, a smaller job or a longer interval in the question's set)"
)


def _none_for_good(fleets: Sequence[dict[str, Any]]) -> str:
    """Why no size answers: none keeps up, or the largest swept does not (a smaller one
    that keeps up is not an answer, a fleet of its size plus some could fall behind)."""
    kept = [fleet["fleet_size"] for fleet in fleets if fleet["keeps_up"]]
    if not kept:
        return NONE_KEEPS_UP
    return (
        f"no size from which every larger swept one keeps up: {_sizes(kept)} "
        f"{'keeps' if kept == [1] else 'keep'} up, but "
        f"{counted(fleets[-1]['fleet_size'], 'phone')} (the largest swept) do not (sweep "
        "larger fleets in axes.fleet_size, or more repetitions)"
    )


def _sizes(sizes: Sequence[int]) -> str:
    """``6 and 8 phones``, ``3, 6 and 8 phones``, ``6 phones``."""
    shown = [str(size) for size in sizes]
    joined = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
    return f"{joined} phone{'' if shown == ['1'] else 's'}"


def describe_capacity(result: dict[str, Any]) -> list[str]:
    """The answer in a few lines (per bandwidth, when several were swept)."""
    repetitions = result["repetitions"]
    every = f"in all {repetitions} runs" if repetitions > 1 else "in its 1 run"
    head = (
        f"a job every {exact_text(result['interarrival_s'])} s ({result['strategy']}, "
        f"{result['scheduler']}), p95 <= {exact_text(result['target_p95_s'])} s, no backlog "
        "growth, "
        f"{every}: "
    )
    lines = []
    for at in result["by_bandwidth"]:
        smallest = at["smallest_fleet"]
        several = len(result["by_bandwidth"]) > 1
        link = f"at {exact_text(at['bandwidth_mbps'])} Mbit/s, " if several else ""
        found = _none_for_good(at["fleets"]) if smallest is None else counted(smallest, "phone")
        lines.append(head + link + found)
        for fleet in at["fleets"]:
            p95 = fleet["worst_p95_s"]
            shown = "no job finished in a run" if p95 is None else f"worst p95 {p95:,.1f} s"
            keeping, runs = fleet["runs_keeping_up"], len(fleet["runs"])
            keep = "keeps up" if 1 in (keeping, runs) else "keep up"
            lines.append(
                f"{counted(fleet['fleet_size'], 'phone')}: {keeping} of "
                f"{counted(runs, 'run')} {keep}, {shown}"
            )
    return lines
