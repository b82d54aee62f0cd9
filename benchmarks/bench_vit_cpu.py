"""Benchmark: the real ViT-B/16 forward per strategy and batch on this machine's CPU.

Run on demand (not part of the test suite):

    .venv/bin/python benchmarks/bench_vit_cpu.py [--reps 3] [--batch 1 2 4 8] [--out rows.csv]

Full 12-block ViT-B/16 (random weights), single on one process vs voltage and
prism (CR 9.9) on 2 local processes over GLOO loopback; every rank, single's
too, gets the same share of the cores (one device's compute). Prints a
markdown table of medians over the reps (and the fastest total, the least
disturbed by other load on the machine).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from edgetwin.emu.local import device_threads, run_local
from edgetwin.results import ResultRow, write_results
from edgetwin.scenario import Scenario
from edgetwin.this_machine import available_cores

PRISM_CR = 9.9


def scenario(batches: list[int], reps: int, devices: int) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "bench_vit_cpu",
            "mode": "local",
            "repetitions": reps,
            "real_warmups": 1,
            "model": {"preset": "vit_b16"},
            "devices": [{"name": "cpu-rank", "profile": "jetson_orin_nano", "count": devices}],
            "strategies": [
                {"name": "single"},
                {"name": "voltage"},
                {"name": "prism", "cr": PRISM_CR},
            ],
            "sweeps": [{"batch": batches, "devices": [devices]}],
        }
    )


def table(rows: list[ResultRow]) -> str:
    """Medians (and the fastest total) per (strategy, batch) as a markdown table."""
    groups: dict[tuple[str, int], list[ResultRow]] = {}
    for row in rows:
        groups.setdefault((row.strategy, row.batch), []).append(row)
    single = {
        batch: statistics.median(r.total_ms for r in group)
        for (strategy, batch), group in groups.items()
        if strategy == "single"
    }
    lines = [
        "| strategy | batch | total ms | min total ms | per sample ms | compute ms | staging ms "
        "| comm ms | MB sent | vs single |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (strategy, batch), group in groups.items():
        total = statistics.median(r.total_ms for r in group)
        name = strategy if group[0].segments is None else f"{strategy} L={group[0].segments}"
        lines.append(
            f"| {name} | {batch} | {total:.0f} | {min(r.total_ms for r in group):.0f} "
            f"| {total / batch:.0f} "
            f"| {statistics.median(r.compute_ms for r in group):.0f} "
            f"| {statistics.median(r.staging_ms for r in group):.1f} "
            f"| {statistics.median(r.comm_ms for r in group):.0f} "
            f"| {group[0].bytes_sent / 1e6:.1f} | {total / single[batch]:.2f}x |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--threads", type=int, help="torch threads per rank (default: equal share)")
    parser.add_argument("--out", type=Path, help="also write the rows as a results CSV")
    args = parser.parse_args()
    started = time.perf_counter()
    bench = scenario(args.batch, args.reps, args.devices)
    threads = args.threads or device_threads(bench)
    rows = run_local(bench, threads=threads)
    wall_s = time.perf_counter() - started
    print(f"{available_cores()} cores, {threads} thread(s) per rank, {wall_s:.0f} s wall\n")
    print(table(rows))
    if args.out is not None:
        write_results(args.out, rows)


if __name__ == "__main__":
    main()
