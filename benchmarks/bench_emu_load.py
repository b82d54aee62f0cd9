"""Benchmark: what other load on the machine does to the emulator's figures (run as root).

Run on demand (not part of the test suite; needs root, Mininet, iperf3):

    sudo .venv/bin/python benchmarks/bench_emu_load.py [--repeats 3] [--busy 0 1 2]

For each load (0, 1, 2 busy-looping processes beside it) it measures, ``--repeats`` times:
- every direction of a two-host link at 200 and 800 Mbps with iperf3 (the link check):
  the wire rate's error against the set rate;
- a single-device ViT forward (ViT-B/16's sequence at half width, one block, batch 4)
  on a host limited to 1, 0.5 and 0.25 cores: median compute, and its ratio to 1 core.
Prints one markdown table per figure with min / median / max over the repeats: the
spread a unit test must not assert on, recorded in docs/emulator.md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from edgetwin.emu.mininet.checks import measure_links
from edgetwin.emu.mininet.mn import missing_requirements
from edgetwin.emu.mininet.net import emulated_network
from edgetwin.emu.mininet.runner import run_emu
from edgetwin.emu.mininet.topology import build_topology
from edgetwin.network_spec import NetworkSpec
from edgetwin.scenario import validate_scenario

RATES_MBPS = (200, 800)
CORES = (1.0, 0.5, 0.25)
SINGLE = {
    "name": "bench_emu_load",
    "repetitions": 3,
    "model": {"tokens": 197, "width": 384, "heads": 6, "blocks": 1},
    "devices": [{"name": "board", "profile": "jetson_orin_nano", "count": 2}],
    "strategies": [{"name": "single"}],
    "sweeps": [{"batch": [4], "bandwidth_mbps": [100], "devices": [2]}],
}


@contextmanager
def busy(processes: int) -> Iterator[None]:
    """``processes`` busy loops running beside the block."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def link_errors_pct(duration_s: float) -> dict[int, list[float]]:
    """Wire-rate error of each direction at each rate, one network."""
    errors: dict[int, list[float]] = {}
    with emulated_network(build_topology(2), NetworkSpec(), RATES_MBPS[0]) as net:
        for rate in RATES_MBPS:
            net.set_bandwidth(rate)
            errors[rate] = [c.error_pct for c in measure_links(net, rate, range(1, 2), duration_s)]
    return errors


def compute_ms(cores: float) -> float:
    """Median single-device compute on a host at ``cores``."""
    raw = {**SINGLE, "real_warmups": 1, "emulator": {"host_cpu_cores": [cores]}}
    run = run_emu(validate_scenario(raw, Path("bench_emu_load.yaml")), link_check_s=0)
    return statistics.median(row.compute_ms for row in run.rows)


def spread(values: list[float], unit: str) -> str:
    low, mid, high = min(values), statistics.median(values), max(values)
    return (
        f"{mid:+.2f} {unit} ({low:+.2f} .. {high:+.2f})"
        if unit == "%"
        else (f"{mid:.2f}{unit} ({low:.2f} .. {high:.2f})")
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--link-s", type=float, default=2.0, help="iperf3 seconds per check")
    args = parser.parse_args()
    missing = missing_requirements()
    if missing:
        print("bench_emu_load needs " + "; ".join(missing), file=sys.stderr)
        return 2
    links: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    ratios: dict[int, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    whole_ms: dict[int, list[float]] = defaultdict(list)
    for load in args.busy:
        with busy(load):
            for _ in range(args.repeats):
                for rate, errors in link_errors_pct(args.link_s).items():
                    links[load][rate] += errors
                times = {cores: compute_ms(cores) for cores in CORES}
                whole_ms[load].append(times[1.0])
                for cores in CORES[1:]:
                    ratios[load][cores].append(times[cores] / times[1.0])
    print("| busy processes | " + " | ".join(f"link error at {r} Mbps" for r in RATES_MBPS) + " |")
    print("| ---: |" + " ---: |" * len(RATES_MBPS))
    for load in args.busy:
        cells = " | ".join(spread(links[load][rate], "%") for rate in RATES_MBPS)
        print(f"| {load} | {cells} |")
    print()
    print(
        "| busy processes | compute at 1 core | "
        + " | ".join(f"{c:g} core / 1 core" for c in CORES[1:])
        + " |"
    )
    print("| ---: | ---: |" + " ---: |" * len(CORES[1:]))
    for load in args.busy:
        cells = " | ".join(spread(ratios[load][cores], "x") for cores in CORES[1:])
        print(f"| {load} | {spread(whole_ms[load], ' ms')} | {cells} |")
    print(f"\n{args.repeats} repeats; links: both directions of each, {args.link_s:g} s each")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
