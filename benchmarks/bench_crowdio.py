"""Benchmark: the CROWDio pipeline on local worker processes, streaming vs barrier.

Run on demand (not part of the test suite):

    .venv/bin/python benchmarks/bench_crowdio.py [--model full] [--inputs 5] [--stages 3]
        [--workers 5] [--repeat 3] [--out results.csv]

For each mode: one cold run (fresh worker caches: every stage is downloaded) and
``--repeat`` warm runs (the caches kept: stages load from disk, as in the reference's
warm runs). Prints pipeline latency, loads, bytes, per-worker peak session memory (what
its sessions and their work added to its RSS) and process RSS, battery,
and the zlib compression measured on the hidden states that crossed each boundary.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from edgetwin.emu.crowdio.launcher import run_pipeline_local
from edgetwin.emu.crowdio.model import FULL, TINY, distilbert_job
from edgetwin.emu.crowdio.records import Mode, PipelineSummary
from edgetwin.emu.crowdio.rows import summary_row
from edgetwin.emu.crowdio.sdk import pipeline_job
from edgetwin.results import ResultRow, write_results

MODELS = {"full": FULL, "tiny": TINY}


def describe(label: str, summary: PipelineSummary) -> None:
    session = ", ".join(f"{w.peak_session_mb or 0:.0f}" for w in summary.workers)
    rss = ", ".join(f"{w.peak_rss_mb:.0f}" for w in summary.workers)
    mah = ", ".join(f"{w.battery_mah:.3f}" for w in summary.workers)
    print(
        f"  {label}: {summary.pipeline_latency_ms:8.1f} ms | loads cold {summary.cold_loads} "
        f"warm {summary.warm_loads}, evictions {summary.evictions} | model bytes "
        f"{summary.model_bytes_sent / 2**20:.1f} MiB, activations "
        f"{summary.activation_bytes / 2**10:.1f} KiB | peak session MB [{session}], "
        f"process RSS MB [{rss}] | mAh [{mah}]"
    )
    print(f"    {loads(summary)}")


def loads(summary: PipelineSummary) -> str:
    """Mean load time by kind, over the loads that preceded a task."""
    parts = []
    for kind in ("cold", "warm"):
        times = [t.report.load_ms for t in summary.tasks if t.report.load_kind == kind]
        if times:
            parts.append(f"{kind} load {statistics.mean(times):.0f} ms (n={len(times)})")
    return ", ".join(parts)


def compression(summary: PipelineSummary) -> None:
    for boundary in summary.boundaries:
        ratio = boundary.raw_bytes / boundary.compressed_bytes
        per_input = boundary.compressed_bytes / summary.inputs
        print(
            f"    {boundary.stage} output {list(boundary.shape)}: "
            f"{boundary.raw_bytes // summary.inputs} -> {per_input:.0f} bytes per input, "
            f"ratio {ratio:.3f} (saves {100 * (1 - 1 / ratio):.1f} %)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", choices=sorted(MODELS), default="full")
    parser.add_argument("--inputs", type=int, default=5)
    parser.add_argument("--stages", type=int, default=3)
    parser.add_argument("--workers", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout-s", type=float, default=600.0)
    parser.add_argument("--out", type=Path, help="write the runs as results rows (CSV)")
    args = parser.parse_args()
    config = MODELS[args.model]
    start = time.perf_counter()
    job = distilbert_job(config, inputs=args.inputs, stages=args.stages)
    sizes = ", ".join(f"{s.name} {len(s.blob) / 2**20:.1f} MiB" for s in job.stages)
    print(
        f"{args.model} DistilBERT (D {config.dim}, {config.layers} layers, {config.heads} heads, "
        f"FFN {config.hidden_dim}, vocab {config.vocab_size}, seq {config.seq_len}): "
        f"exported in {time.perf_counter() - start:.1f} s"
    )
    print(f"stages: {sizes}; N = {args.inputs}, S = {args.stages}, {args.workers} workers")
    rows: list[ResultRow] = []
    modes: tuple[Mode, ...] = ("streaming", "barrier")
    for mode in modes:
        run_job = pipeline_job(job.stages, job.inputs, mode=mode, seed=job.seed)
        print(f"{mode}:")
        with tempfile.TemporaryDirectory(prefix="crowdio-bench-") as caches:
            warm_ms = []
            for rep in range(args.repeat + 1):
                wall = time.perf_counter()
                summary = run_pipeline_local(
                    run_job,
                    workers=args.workers,
                    timeout_s=args.timeout_s,
                    cache_root=Path(caches),
                )
                label = "cold" if rep == 0 else f"warm {rep}"
                describe(f"{label} (wall {time.perf_counter() - wall:5.1f} s)", summary)
                if rep > 0:
                    warm_ms.append(summary.pipeline_latency_ms)
                rows.append(
                    summary_row(summary, scenario="crowdio_bench", bandwidth_mbps=0.0, rep=rep)
                )
            if warm_ms:
                print(f"  warm median {statistics.median(warm_ms):.1f} ms")
            print(f"  majority class {summary.majority_class}; zlib on real activations:")
            compression(summary)
    if args.out is not None:
        write_results(args.out, rows)


if __name__ == "__main__":
    main()
