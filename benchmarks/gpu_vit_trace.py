"""Real GPU->host->GPU staging of the ViT code paths on one NVIDIA GPU (GLOO on loopback).

Run on a machine with an NVIDIA GPU and a CUDA build of torch, edgetwin importable:

    python benchmarks/gpu_vit_trace.py --out DIR        # DIR defaults to $OUT

ViT-B/16 (12 blocks, random weights): single on one process, voltage and prism
(L = 10, 20, 30) on 2 ranks sharing the GPU, batch 1-32, 20 timed forwards after
warm-up. Every exchanged tensor is copied GPU->host before GLOO and host->GPU
after. Writes into DIR:

- ``results.csv``: the results schema (mode ``local``) plus per-phase columns:
  rank 0's ``stage_out_ms``/``stage_in_ms`` and rank 1's ``peer_*_ms``;
- ``blocks.csv``: every rank's phases per step (embed, block0-11, head) and rep;
- ``trace_b8.json.gz``: PyTorch profiler Chrome traces of one batch-8 forward of
  voltage and prism (both ranks), merged into one file (open in Perfetto);
- ``environment.json``: torch, GPU, host cores, date.

``--device cpu --quick`` is a dry run on a CPU (a small ViT, batch 1-2, 2 reps).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import gzip
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from edgetwin.emu.local import LocalRun, measure_local, result_rows
from edgetwin.emu.vit.phases import PHASES
from edgetwin.results import REQUIRED_COLUMNS
from edgetwin.scenario import Scenario
from edgetwin.this_machine import available_cores

SEGMENTS = (10, 20, 30)


@dataclass(frozen=True)
class Settings:
    model: dict[str, Any]
    batches: tuple[int, ...]
    reps: int
    warmup: int
    trace_batch: int


FULL = Settings({"preset": "vit_b16"}, (1, 2, 4, 8, 16, 32), reps=20, warmup=3, trace_batch=8)
# a small ViT: 65 tokens, partitions of 33 and 32 rows, so L = 10, 20, 30 differ
QUICK = Settings(
    {"tokens": 65, "width": 64, "heads": 4, "blocks": 2, "patch_size": 4},
    (1, 2),
    reps=2,
    warmup=1,
    trace_batch=2,
)
EXTRA_COLUMNS = (
    "max_abs_diff_vs_single",
    "top1_agreement_vs_single",
    "stage_out_ms",
    "stage_in_ms",
    "peer_compute_ms",
    "peer_staging_ms",
    "peer_comm_ms",
    "peer_total_ms",
)
BLOCK_COLUMNS = (
    "strategy",
    "segments",
    "batch",
    "rep",
    "rank",
    "step",
    *(f"{p}_ms" for p in PHASES),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=os.environ.get("OUT"))
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument(
        "--quick", action="store_true", help="small dry run (use with --device cpu)"
    )
    args = parser.parse_args()
    if args.out is None:
        parser.error("give --out DIR (or set OUT)")
    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            f"gpu_vit_trace: error: torch {torch.__version__} sees no CUDA GPU. This script "
            "measures real GPU->host->GPU staging: run it on a machine with an NVIDIA GPU and a "
            "CUDA build of torch (or use --device cpu --quick for a dry run).",
            file=sys.stderr,
        )
        return 2
    settings = QUICK if args.quick else FULL
    scenario = _scenario(settings)
    args.out.mkdir(parents=True, exist_ok=True)
    _write_environment(args.out / "environment.json", args.device)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-vit-traces-") as traces:
        runs = []
        for run in measure_local(
            scenario,
            device=args.device,
            trace_dir=Path(traces),
            trace_batch=settings.trace_batch,
            echo_rank0=True,
        ):
            runs.append(run)
            print(f"[{time.perf_counter() - started:6.1f} s] done: {_label(run)}", flush=True)
        _merge_traces(Path(traces), args.out / f"trace_b{settings.trace_batch}.json.gz")
    _write_results(args.out / "results.csv", scenario, runs)
    _write_blocks(args.out / "blocks.csv", runs)
    print(f"wrote {args.out} in {time.perf_counter() - started:.0f} s", flush=True)
    return 0


def _scenario(settings: Settings) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "gpu_vit_trace",
            "mode": "local",
            "repetitions": settings.reps,
            "real_warmups": settings.warmup,
            "model": settings.model,
            "devices": [{"name": "gpu-rank", "profile": "jetson_orin_nano", "count": 2}],
            "strategies": [
                {"name": "single"},
                {"name": "voltage"},
                {"name": "prism", "segments": list(SEGMENTS)},
            ],
            "sweeps": [{"batch": list(settings.batches), "devices": [2]}],
        }
    )


def _label(run: LocalRun) -> str:
    segments = run.ranks[0].segments
    name = run.config.strategy + ("" if segments is None else f" L={segments}")
    return f"{name} batch {run.config.batch}"


def _write_environment(path: Path, device: str) -> None:
    environment = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None,
        "host_cores": available_cores(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    path.write_text(json.dumps(environment, indent=2) + "\n")


def _write_results(path: Path, scenario: Scenario, runs: list[LocalRun]) -> None:
    columns = [*REQUIRED_COLUMNS, *EXTRA_COLUMNS]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        for run in runs:
            for row in result_rows(scenario, run):
                terminal = run.ranks[0].reps[row.rep]
                record: dict[str, object] = {
                    **asdict(row),
                    "stage_out_ms": terminal.phase_ms("stage_out"),
                    "stage_in_ms": terminal.phase_ms("stage_in"),
                }
                if len(run.ranks) > 1:
                    peer = run.ranks[1].reps[row.rep]
                    record |= {
                        "peer_compute_ms": peer.phase_ms("compute"),
                        "peer_staging_ms": peer.staging_ms,
                        "peer_comm_ms": peer.phase_ms("comm"),
                        "peer_total_ms": peer.total_ms,
                    }
                writer.writerow({k: _cell(v) for k, v in record.items()})


def _write_blocks(path: Path, runs: list[LocalRun]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(BLOCK_COLUMNS)
        for run in runs:
            for rank, record in enumerate(run.ranks):
                for rep, timing in enumerate(record.reps):
                    for step, phases in timing.steps_ms.items():
                        writer.writerow(
                            [
                                run.config.strategy,
                                _cell(record.segments),
                                run.config.batch,
                                rep,
                                rank,
                                step,
                                *(_cell(phases.get(phase, 0.0)) for phase in PHASES),
                            ]
                        )


def _cell(value: object) -> str:
    if value is None:
        return ""
    return format(value, ".6g") if isinstance(value, float) else str(value)


def _merge_traces(folder: Path, path: Path) -> None:
    """Every trace in ``folder`` as one Chrome trace, each process labelled by its file."""
    events: list[dict[str, Any]] = []
    for index, trace_path in enumerate(sorted(folder.glob("trace_*.json"))):
        label = trace_path.stem.removeprefix("trace_")
        pids: dict[object, int] = {}
        for event in json.loads(trace_path.read_text())["traceEvents"]:
            if "pid" in event:
                event["pid"] = pids.setdefault(event["pid"], 1000 * (index + 1) + len(pids))
            if event.get("ph") != "M" or event.get("name") != "process_name":
                events.append(event)
        for original, pid in pids.items():
            name = f"{label} ({'gpu ' if original == 0 else 'pid '}{original})"
            events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}})
    with gzip.open(path, "wt") as handle:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, handle)


if __name__ == "__main__":
    sys.exit(main())
