"""Benchmark: wall time of the full prism_jetson and llm_jetson sweeps, and simulated /
wall time.

Run on demand (not part of the test suite):

    .venv/bin/python benchmarks/bench_twin.py [--repeat 5] [--devices 8]

``--devices N`` also times a bigger what-if (N boards, every strategy, more
batches and bandwidths) to show how the twin scales with devices and events. The
llm_jetson sweep (Llama-3.2-1B, 128 output tokens: a prefill and 127 decode steps per
run) shows what simulating every decode step layer by layer costs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from edgetwin.scenario import Scenario, load_scenario
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.runner import run_scenario

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios/prism_jetson.yaml"
LLM_SCENARIO = REPO / "scenarios/llm_jetson.yaml"


def time_sweep(
    scenario: Scenario, repeat: int, path: Path = SCENARIO
) -> tuple[list[float], float, int]:
    """Wall seconds of each repeat, simulated seconds and number of runs of one sweep."""
    fleet = build_fleet(scenario, path)
    walls, simulated, runs = [], 0.0, 0
    for _ in range(repeat):
        start = time.perf_counter()
        rows = [o.row for o in run_scenario(scenario, fleet)]
        walls.append(time.perf_counter() - start)
        simulated = sum(r.total_ms for r in rows if r.status == "ok") / 1e3
        runs = len(rows)
    return walls, simulated, runs


def report(label: str, scenario: Scenario, repeat: int, path: Path = SCENARIO) -> None:
    walls, simulated_s, runs = time_sweep(scenario, repeat, path)
    wall_s = statistics.median(walls)
    print(
        f"{label}: {runs} runs, wall {wall_s:.3f} s (median of {repeat}; "
        f"{min(walls):.3f}-{max(walls):.3f} s), {wall_s / runs * 1e3:.2f} ms/run, "
        f"simulated {simulated_s:.1f} s, simulated/wall {simulated_s / wall_s:.1f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--devices", type=int, default=8)
    args = parser.parse_args()
    report("prism_jetson full sweep", load_scenario(SCENARIO), args.repeat)
    bigger = load_scenario(
        SCENARIO,
        [
            f"devices.0.count={args.devices}",
            f"sweeps=[{{batch: [1, 4, 16, 64], bandwidth_mbps: [200, 500, 900], "
            f"devices: [2, {args.devices // 2}, {args.devices}]}}]",
            "strategies=[{name: single}, {name: voltage}, {name: prism, cr: [9.9, 3.3]}, "
            "{name: tensor_parallel}]",
        ],
    )
    report(f"what-if up to {args.devices} boards", bigger, max(1, args.repeat // 2))
    report("llm_jetson full sweep", load_scenario(LLM_SCENARIO), args.repeat, LLM_SCENARIO)


if __name__ == "__main__":
    main()
