"""Benchmark: twin vs emulator after calibrating the twin from the emulator (run as root).

Run on demand (not part of the test suite; needs root, Mininet, iperf3):

    sudo .venv/bin/python benchmarks/bench_emu_loop.py [--out out/bench_emu_loop]
        [--fit scenarios/emu_loop_fit.yaml] [--check scenarios/emu_loop_check.yaml]

The emulator runs the fit sweep, this machine's profile is fitted from that run
alone (``edgetwin calibrate-machine --emu``), the twin and the emulator run the
check sweep (other batches and bandwidths), and the two are compared configuration
by configuration (each one's median repetition, and its fastest). Prints a
markdown table of the median |error| per metric (in-sample on the fit sweep,
held out on the check sweep) and the wall time of each step; writes
``OUT/errors.json`` beside the runs, the profile and ``comparison.csv``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from edgetwin.calibration.emu_loop import close_loop
from edgetwin.comparison import METRICS
from edgetwin.emu.mininet.mn import missing_requirements
from edgetwin.links import link_warnings, read_link_checks

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", type=Path, default=REPO / "scenarios/emu_loop_fit.yaml")
    parser.add_argument("--check", type=Path, default=REPO / "scenarios/emu_loop_check.yaml")
    parser.add_argument("--out", type=Path, default=REPO / "out/bench_emu_loop")
    args = parser.parse_args()
    missing = missing_requirements()
    if missing:
        print("bench_emu_loop needs " + "; ".join(missing), file=sys.stderr)
        return 2
    result = close_loop(args.fit, args.check, args.out)
    load = os.getloadavg()  # other work on the cores slows the emulator, not the twin
    in_sample = result.profile.fit["median_abs_error_pct"]
    held_out = result.check.median_abs_error_pct
    fastest = result.check_fastest.median_abs_error_pct
    counts = {
        metric: sum(
            p["metric"] == metric and p["error_pct"] is not None for p in result.check.points
        )
        for metric in held_out
    }
    print(
        "| metric | fit sweep, in-sample | held out, median rep | held out, fastest rep | points |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for metric in (m for m in METRICS if m in held_out):
        print(
            f"| {metric} | {in_sample.get(metric, float('nan')):.1f} % "
            f"| {held_out[metric]:.1f} % | {fastest[metric]:.1f} % | {counts[metric]} |"
        )
    print("wall s: " + ", ".join(f"{step} {s:.0f}" for step, s in result.wall_s.items()))
    print("load average at the end (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in load))
    for warning in result.warnings:  # a schedule step the emulator never played
        print(f"warning: {warning}")
    # links that fell short make every figure suspect (the fit warned of emu_fit's)
    checks = args.out / "emu_check" / "link_check.csv"
    for warning in link_warnings(read_link_checks(checks)) if checks.exists() else []:
        print(f"warning: emu_check: {warning}")
    summary = {
        "fit_median_abs_error_pct": in_sample,
        "check_median_abs_error_pct": held_out,
        "check_fastest_median_abs_error_pct": fastest,
        "check_points": counts,
        "profile": {
            section: getattr(result.profile, section).model_dump()
            for section in ("compute", "staging", "network")
        },
        "wall_s": result.wall_s,
        "load_average": load,
    }
    (args.out / "errors.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"-> {args.out}/errors.json, comparison.csv, machine/profile.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
