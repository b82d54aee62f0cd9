"""Benchmark: the crowd twin, calibrated on this machine's emulated phones, vs the emulator.

Run on demand (not part of the test suite; the emulator step needs root, Mininet, iperf3):

    sudo .venv/bin/python benchmarks/bench_crowd_emu_twin.py emu OUT [--scenario S]
    .venv/bin/python benchmarks/bench_crowd_emu_twin.py compare OUT [OUT2 ...]

``emu`` runs ``scenarios/emu_crowdio_cpu.yaml`` (the real foreman and ONNX Runtime
workers, full-size stages, CPU-limited phones; the modes take turns, one job each,
``configuration.in_turn``) and keeps every job's summary
(``OUT/summaries.jsonl``), row (``OUT/results.csv``) and link check. ``compare`` fits the emulated
phones from the first folder's task records (``calibration.emu_phones``: loads per
stage on this machine's measured load model, inference per stage) and runs the twin
on the same scenario with them; it prints, per mode, the emulator's and the twin's
latency of every folder (mean and spread over the runs) and the twin's error. A job
with a cold load is left out (and counted): a worker that did not hold a stage in the
warm-up job has no copy of it, and the twin's warm cache holds every stage.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios/emu_crowdio_cpu.yaml"


def run_emulator(out: Path, scenario_path: Path) -> None:
    from edgetwin.emu.mininet.checks import write_link_checks
    from edgetwin.emu.mininet.crowd import run_crowd_emu
    from edgetwin.results import write_results
    from edgetwin.scenario import load_scenario

    scenario = load_scenario(scenario_path)
    run = run_crowd_emu(scenario, scenario_path)
    out.mkdir(parents=True, exist_ok=True)
    write_results(out / "results.csv", run.rows)
    write_link_checks(out / "link_check.csv", run.links)
    with (out / "summaries.jsonl").open("w") as handle:
        for summary in run.summaries:
            handle.write(summary.model_dump_json() + "\n")
    for row in run.rows:
        print(f"{row.strategy} rep {row.rep}: {row.total_ms:.0f} ms")


def compare(folders: list[Path], scenario_path: Path) -> None:
    from edgetwin.calibration.emu_phones import fit_emulated_phones, read_summaries, twin_latencies
    from edgetwin.comparison import relative_pct
    from edgetwin.scenario import load_scenario

    scenario = load_scenario(scenario_path)
    first = folders[0]
    phones = fit_emulated_phones(
        scenario, scenario_path, read_summaries(first), first / "link_check.csv"
    )
    for phone in phones:
        s = phone.session
        print(
            f"{phone.name}: load {s.floor_s * 1e3:.1f} ms + {s.s_per_mb * 1e3:.2f} ms/MB "
            f"(+{s.s_per_mapped_mb * 1e3:.2f} mapped), cv {s.load_cv:.3f}; "
            f"{phone.cpu_gflops:.2f} GFLOP/s, floor {phone.inference_floor_ms:.1f} ms, "
            f"message {phone.network.message_overhead_ms:.1f} ms"
        )
    twin = twin_latencies(scenario, scenario_path, phones)
    print("| mode | " + " | ".join(f"emulator {f.name}" for f in folders) + " | twin | error |")
    for strategy, predicted in twin.items():
        cells, means = [], []
        for folder in folders:
            jobs = [s for s in read_summaries(folder) if f"crowdio_{s.mode}" == strategy]
            measured = [s.pipeline_latency_ms / 1e3 for s in jobs if s.cold_loads == 0]
            means.append(statistics.fmean(measured))
            cold = len(jobs) - len(measured)
            cells.append(_spread(measured) + (f", {cold} left out (cold loads)" if cold else ""))
        error = relative_pct(statistics.fmean(predicted), statistics.fmean(means))
        print(
            f"| {strategy} | " + " | ".join(cells) + f" | {_spread(predicted)} | {error:+.1f} % |"
        )


def _spread(values: list[float]) -> str:
    return f"{statistics.fmean(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    emu = sub.add_parser("emu")
    emu.add_argument("out", type=Path)
    emu.add_argument("--scenario", type=Path, default=SCENARIO)
    cmp = sub.add_parser("compare")
    cmp.add_argument("folders", type=Path, nargs="+")
    cmp.add_argument("--scenario", type=Path, default=SCENARIO)
    args = parser.parse_args()
    if args.step == "emu":
        run_emulator(args.out, args.scenario)
    else:
        compare(args.folders, args.scenario)


if __name__ == "__main__":
    main()
