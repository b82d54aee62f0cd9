"""``benchmarks/gpu_vit_trace.py`` runs end to end on a CPU (``--device cpu --quick``)."""

from __future__ import annotations

import csv
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from edgetwin.result_cells import read_results
from edgetwin.results import REQUIRED_COLUMNS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks/gpu_vit_trace.py"


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600
    )


def test_quick_cpu_run_writes_results_blocks_and_one_trace(tmp_path: Path) -> None:
    done = run_script("--device", "cpu", "--quick", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "prism L=30 P=2 batch 2" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "blocks.csv",
        "environment.json",
        "results.csv",
        "trace_b2.json.gz",
    ]
    rows = read_results(tmp_path / "results.csv")
    configs = {(r.strategy, r.segments, r.batch) for r in rows}
    assert configs == {
        (strategy, segments, batch)
        for strategy, segments in [("single", None), ("voltage", None)]
        + [("prism", L) for L in (10, 20, 30)]
        for batch in (1, 2)
    }
    assert {r.mode for r in rows} == {"local"} and len(rows) == 2 * len(configs)
    with (tmp_path / "results.csv").open() as handle:
        header = next(csv.reader(handle))
    assert header[: len(REQUIRED_COLUMNS)] == list(REQUIRED_COLUMNS)
    assert {"stage_out_ms", "stage_in_ms", "peer_comm_ms"} <= set(header)
    with (tmp_path / "blocks.csv").open() as handle:
        steps = {record["step"] for record in csv.DictReader(handle)}
    assert steps == {"embed", "block0", "block1", "head"}
    with gzip.open(tmp_path / "trace_b2.json.gz", "rt") as handle:
        events = json.load(handle)["traceEvents"]
    labels = {e["args"]["name"].split()[0] for e in events if e.get("name") == "process_name"}
    assert {"voltage_b2_rank0", "voltage_b2_rank1", "prism_L10_b2_rank0"} <= labels
    assert any(e.get("name") == "block1/comm" for e in events)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine with no GPU")
def test_without_a_gpu_it_fails_clearly(tmp_path: Path) -> None:
    done = run_script("--out", str(tmp_path))
    assert done.returncode == 2
    assert "sees no CUDA GPU" in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []
