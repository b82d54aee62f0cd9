"""Benchmark: what the emulator's latency and loss without netem cost the links (run as root).

Run on demand (not part of the test suite; needs root, Mininet, iperf3, iptables, ethtool):

    sudo .venv/bin/python benchmarks/bench_emu_delay.py [--repeats 3] [--rates 50 200 900]

For each (latency_ms, loss_pct) of ``--cases`` it builds a two-host network and, at each
rate, runs the link check (``measure_links``): the TCP wire rate's error against the set
rate in both directions (does the link still carry its rate through the delay lines, or
with the offloads off that loss needs?), the latency ping measures (half the mean round
trip, user to user) and the loss the UDP probes measure. Prints a markdown table with
min / median / max over the repeats and both directions: the figures in docs/emulator.md
that decide at which rates the delay line and the loss rules can be trusted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict

from edgetwin.emu.mininet.checks import LinkCheck, measure_links
from edgetwin.emu.mininet.mn import missing_requirements
from edgetwin.emu.mininet.net import emulated_network
from edgetwin.emu.mininet.topology import build_topology
from edgetwin.links import TOLERANCE_PCT
from edgetwin.network_spec import NetworkSpec

RATES_MBPS = (50, 100, 200, 400, 800, 900)  # the shipped emulator scenarios' range
CASES = ("0:0", "2:0", "10:0", "0:1", "2:1")  # latency_ms:loss_pct


def checks_of(
    latency_ms: float, loss_pct: float, rates: list[float], link_s: float
) -> list[LinkCheck]:
    """Every rate's link check on one network with that latency and loss."""
    network = NetworkSpec(latency_ms=latency_ms, loss_pct=loss_pct)
    found = []
    with emulated_network(build_topology(2), network, rates[0]) as net:
        for rate in rates:
            net.set_bandwidth(rate)
            found += measure_links(net, rate, range(1, 2), link_s)
    return found


def spread(values: list[float], fmt: str) -> str:
    if not values:
        return "-"
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:{fmt}} ({low:{fmt}} .. {high:{fmt}})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rates", type=float, nargs="+", default=list(RATES_MBPS))
    parser.add_argument("--cases", nargs="+", default=list(CASES), help="latency_ms:loss_pct")
    parser.add_argument("--link-s", type=float, default=2.0, help="iperf3 seconds per check")
    args = parser.parse_args()
    missing = missing_requirements()
    if missing:
        print("bench_emu_delay needs " + "; ".join(missing), file=sys.stderr)
        return 2
    cases = [tuple(float(x) for x in case.split(":")) for case in args.cases]
    found: dict[tuple[float, float, float], list[LinkCheck]] = defaultdict(list)
    for _ in range(args.repeats):
        for latency_ms, loss_pct in cases:
            for check in checks_of(latency_ms, loss_pct, args.rates, args.link_s):
                found[latency_ms, loss_pct, check.bandwidth_mbps].append(check)
    print("| latency ms | loss % | rate Mbps | wire error % | within 5 % | latency measured ms"
          " | loss measured % |")  # fmt: skip
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (latency_ms, loss_pct, rate), checks in found.items():
        errors = [c.error_pct for c in checks]
        latencies = [c.latency_measured_ms for c in checks if c.latency_measured_ms is not None]
        losses = [c.loss_measured_pct for c in checks if c.loss_measured_pct is not None]
        within = sum(abs(e) <= TOLERANCE_PCT for e in errors)
        print(
            f"| {latency_ms:g} | {loss_pct:g} | {rate:g} | {spread(errors, '+.2f')} "
            f"| {within}/{len(errors)} | {spread(latencies, '.2f')} | {spread(losses, '.2f')} |"
        )
    print(f"\n{args.repeats} repeats x 2 directions; TCP {args.link_s:g} s each after 1 s warm-up")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
