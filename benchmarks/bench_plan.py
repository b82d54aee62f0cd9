"""A 10,000-configuration what-if sweep (best mode over batch x bandwidth x fleet).

``.venv/bin/python benchmarks/bench_plan.py [--workers 2]``: runs the sweep on a
local process pool into a temporary folder and prints its wall time.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import yaml

from edgetwin.plan.executors import PoolExecutor
from edgetwin.plan.question_file import load_question
from edgetwin.plan.run import run_plan
from edgetwin.reports.plan import write_plan_report

REPO = Path(__file__).resolve().parents[1]
QUESTION = {
    "name": "bench_10k",
    "scenario": str(REPO / "scenarios" / "prism_jetson.yaml"),
    "set": [
        "devices.0.count=8",
        "strategies=[{name: single}, {name: voltage}, {name: prism, cr: [9.9, 4.95]}]",
    ],
    "axes": {
        "batch": [1, 2, 3, 4, 6, 8, 12, 16, 24, 32],
        "bandwidth_mbps": [10 * k for k in range(1, 101)],
        "devices": [2, 4, 8],
    },
    "question": {"kind": "best_mode"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.plan.yaml"
        path.write_text(yaml.safe_dump(QUESTION))
        loaded = load_question(path)
        start = time.perf_counter()
        outcome = run_plan(loaded, Path(tmp) / "out", PoolExecutor(args.workers), write_plan_report)
        wall_s = time.perf_counter() - start
    per_ms = 1000 * wall_s / outcome.configurations
    print(
        f"{outcome.configurations} configurations, {len(outcome.rows)} runs, "
        f"{args.workers} workers: {wall_s:.1f} s ({per_ms:.2f} ms per configuration)"
    )


if __name__ == "__main__":
    main()
