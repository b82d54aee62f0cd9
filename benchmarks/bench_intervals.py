"""Benchmark: what prediction intervals cost the twin, and their held-out coverage.

Run on demand (not part of the test suite):

    .venv/bin/python benchmarks/bench_intervals.py [--repeat 5]

Times the h200_bw and prism_jetson sweeps with and without ``intervals: 0.9`` (each
row reruns under every bootstrap variant of its profiles), then prints the nested
coverage of the 90 % bands on every shipped profile's leave-one-out points (the
figures in docs/calibration.md, "Prediction intervals").
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from edgetwin.calibration.held_out import HoldoutBy, nested_coverage
from edgetwin.calibration.reference_holdout import leave_one_batch_out_table
from edgetwin.calibration.trace_holdout import leave_one_out
from edgetwin.scenario import load_scenario
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.runner import run_scenario

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "edgetwin" / "calibration" / "specs"


def sweep_seconds(path: Path, overrides: list[str], repeat: int) -> list[float]:
    scenario = load_scenario(path, overrides)
    fleet = build_fleet(scenario, path)
    walls = []
    for _ in range(repeat):
        start = time.perf_counter()
        list(run_scenario(scenario, fleet))
        walls.append(time.perf_counter() - start)
    return walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for name in ("h200_bw", "prism_jetson"):
        path = REPO / "scenarios" / f"{name}.yaml"
        for label, overrides in (("plain", []), ("intervals 0.9", ["intervals=0.9"])):
            walls = sweep_seconds(path, overrides, args.repeat)
            print(
                f"{name} {label}: median {statistics.median(walls):.2f} s of {args.repeat} "
                f"({min(walls):.2f}-{max(walls):.2f} s)"
            )
    checks: list[tuple[str, HoldoutBy | None]] = [
        ("h200_loopback", "batch"),
        ("h200_netns", "batch"),
        ("h200_netns", "bandwidth"),
        ("jetson_orin_nano", None),
    ]
    for spec, by in checks:
        path = SPECS / f"{spec}.yaml"
        refits = leave_one_batch_out_table(path) if by is None else leave_one_out(path, by)
        points = refits.points
        for metric, stats in nested_coverage(points).items():
            print(
                f"{spec} by {by or 'batch'} {metric}: {stats['coverage_pct']:.1f} % of "
                f"{stats['repetitions']:.0f} held-out repetitions in {stats['groups']:.0f} groups"
            )


if __name__ == "__main__":
    main()
