"""The memory bandwidth from decoder generations: the fit recovers the twin's own
bandwidth, the spec and the command wire it into a profile and a held-out check, and a
small real run writes the trace."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from edgetwin.calibration.fit_decoder import fit_memory
from edgetwin.calibration.readers.decoder_latency import (
    DECODER_LATENCY_COLUMNS,
    DecoderLatency,
    read_decoder_latency,
)
from edgetwin.cli import main
from edgetwin.decoder_spec import DecoderSpec
from edgetwin.profile import load_profile
from edgetwin.scenario import load_scenario
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.runner import simulate
from edgetwin.sweep_points import Configuration
from tests.conftest import REPO

JETSON = REPO / "edgetwin/calibration/profiles/jetson_orin_nano.yaml"
BANDWIDTH_GBPS = 23.7  # not the profile's 68: the fit must find it from the times
MODEL = {"kind": "decoder", "layers": 2, "width": 256, "heads": 4, "kv_heads": 4}
MODEL |= {"ffn_size": 1024, "vocab": 8192, "max_positions": 128}
SHAPES = [(layers, batch, prompt) for layers in (1, 2) for batch in (1, 4) for prompt in (8, 32)]
OUTPUT_TOKENS = 4


def _profile(tmp_path: Path) -> Path:
    raw = yaml.safe_load(JETSON.read_text())
    raw["memory"] = {**raw["memory"], "bandwidth_gbps": BANDWIDTH_GBPS}
    path = tmp_path / "jetson_slow_memory.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _twin_generations(profile: Path, tmp_path: Path) -> list[DecoderLatency]:
    """TTFT and TPOT of one simulated device (the SimPy twin), at every shape."""
    path = tmp_path / "twin.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "twin_generations",
                "model": MODEL,
                "devices": [{"name": "board", "profile": str(profile), "count": 2}],
                "strategies": [{"name": "single"}],
                "workload": {"prompt_tokens": 8, "output_tokens": OUTPUT_TOKENS},
            }
        )
    )
    records = []
    for layers, batch, prompt in SHAPES:
        scenario = load_scenario(path, [f"model.layers={layers}"])
        config = Configuration(
            strategy="single",
            devices=1,
            batch=batch,
            bandwidth_mbps=400,
            prompt_tokens=prompt,
            output_tokens=OUTPUT_TOKENS,
        )
        row = simulate(scenario, build_fleet(scenario, path), config, 0).row
        assert row.ttft_ms is not None and row.tpot_ms is not None
        records.append(
            DecoderLatency(layers, batch, prompt, OUTPUT_TOKENS, 0, row.ttft_ms, row.tpot_ms)
        )
    return records


@pytest.mark.timeout(120)
def test_the_fit_recovers_the_bandwidth_the_twin_ran_with(tmp_path: Path) -> None:
    profile = _profile(tmp_path)
    records = _twin_generations(profile, tmp_path)
    compute = load_profile(str(profile)).compute
    fit = fit_memory(records, DecoderSpec(**MODEL), compute, 0, np.random.default_rng(0))
    assert fit.params["bandwidth_gbps"] == pytest.approx(BANDWIDTH_GBPS, rel=1e-3)
    assert max(abs(r["error_pct"]) for r in fit.residuals) < 0.1  # the twin's own times


@pytest.mark.timeout(120)
def test_compute_and_bandwidth_fitted_together_recover_the_twins(tmp_path: Path) -> None:
    """ViT latencies and decoder generations of one device, both the twin's own: the
    joint fit finds its throughput and its bandwidth."""
    from edgetwin.calibration.fit_decoder import fit_compute_and_memory
    from edgetwin.calibration.trace_predictors import compute_predictor
    from edgetwin.model_spec import ModelSpec

    profile = _profile(tmp_path)
    records = _twin_generations(profile, tmp_path)
    compute = load_profile(str(profile)).compute
    vit = ModelSpec(tokens=65, width=192, blocks=4, heads=3)
    predict = compute_predictor(vit)
    truth = compute.model_dump(include={"throughput_gflops", "launch_floor_ms", "rows_half_util"})
    groups = {
        (kind, batch, 65): [predict(truth, (kind, batch, 65))]
        for kind in ("vit_full", "encoder_tokens")
        for batch in (1, 2, 4, 8)
    }
    fixed = {"sync_host_ms": 0.0, "sync_host_ms_per_mb": 0.0}
    fits = fit_compute_and_memory(
        groups, predict, records, DecoderSpec(**MODEL), fixed, 0, np.random.default_rng(0)
    )
    compute_fit, memory_fit = fits
    assert memory_fit.params["bandwidth_gbps"] == pytest.approx(BANDWIDTH_GBPS, rel=1e-2)
    assert compute_fit.params["throughput_gflops"] == pytest.approx(
        compute.throughput_gflops, rel=1e-2
    )
    assert {r["metric"] for r in memory_fit.residuals} == {"ttft_ms", "tpot_ms"}
    assert {r["metric"] for r in compute_fit.residuals} == {"latency_ms"}
    assert "2 layers, batch 1, prompt 8, 4 out" in {r["point"] for r in memory_fit.residuals}
    assert "bandwidth_gbps" not in compute_fit.params


def _trace_spec(tmp_path: Path, records: list[DecoderLatency], **changes: Any) -> Path:
    """A ``traces`` spec: the Jetson profile as base (compute), a decoder trace with
    repetitions slowed by load (the fastest is the twin's)."""
    traces = tmp_path / "traces"
    traces.mkdir()
    with (traces / "decoder_latency.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(DECODER_LATENCY_COLUMNS)
        for r in records:
            for rep, slowed in enumerate((1.0, 1.4, 1.1)):
                shape = (r.layers, r.batch, r.prompt_tokens, r.output_tokens, rep)
                writer.writerow((*shape, r.ttft_ms * slowed, r.tpot_ms * slowed))
    spec = {
        "kind": "traces",
        "profile": {"name": "board", "ram_mb": 8000},
        "traces": "traces",
        "base": str(JETSON),
        "decoder": MODEL,
        "fit": ["memory"],
        "bootstrap": 3,
    } | changes
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.timeout(120)
def test_calibrate_and_validate_a_decoder_trace(tmp_path: Path) -> None:
    records = _twin_generations(_profile(tmp_path), tmp_path)
    spec = _trace_spec(tmp_path, records)
    assert main(["calibrate", str(spec), "--out", str(tmp_path / "p.yaml")]) == 0
    profile = load_profile(str(tmp_path / "p.yaml"))
    assert profile.memory is not None and profile.memory.fitted
    assert profile.memory.bandwidth_gbps == pytest.approx(BANDWIDTH_GBPS, rel=1e-3)
    assert "decoder_latency.csv" in profile.memory.source
    for by, held_out in (("prompt", 8), ("batch", 8)):
        out = tmp_path / f"v_{by}"
        assert main(["validate", str(spec), "--out", str(out), "--by", by]) == 0
        left_out = {"prompt": "prompt length", "batch": "batch size"}[by]
        assert f"fitted without its {left_out}." in (out / "validation.html").read_text()
        summary = json.loads((out / "validation.json").read_text())
        for metric in ("ttft_ms", "tpot_ms"):
            assert summary[metric]["points"] == held_out  # every shape once, unseen
            assert summary[metric]["max_abs_error_pct"] < 0.1
        with (out / "validation.csv").open(newline="") as handle:
            labels = {row["point"] for row in csv.DictReader(handle)}  # was "1 4 32 4"
        assert {"1 layer, batch 4, prompt 32, 4 out", "2 layers, batch 1, prompt 8, 4 out"} < labels


def test_a_decoder_trace_without_its_decoder_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = DecoderLatency(1, 1, 8, 4, 0, 10.0, 2.0)
    spec = _trace_spec(tmp_path, [record], decoder=None)
    assert main(["calibrate", str(spec), "--out", str(tmp_path / "p.yaml")]) == 2
    err = capsys.readouterr().err
    assert "spec.yaml" in err and "decoder" in err and "Traceback" not in err
    assert not (tmp_path / "p.yaml").exists()


def test_a_generation_beyond_the_decoders_positions_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace of prompts the spec's decoder cannot hold was fitted as if it ran them."""
    records = [DecoderLatency(1, 1, prompt, 4, 0, 10.0 + prompt, 2.0) for prompt in (8, 32, 200)]
    spec = _trace_spec(tmp_path, records)
    assert main(["calibrate", str(spec), "--out", str(tmp_path / "p.yaml")]) == 2
    err = capsys.readouterr().err
    assert "decoder_latency.csv: field 'prompt_tokens'" in err and "Traceback" not in err
    assert "200 prompt and 4 output tokens feed 203 positions" in err
    assert "more than the model's 128" in err
    assert not (tmp_path / "p.yaml").exists()


def test_a_bad_trace_row_names_the_file_line_and_column(tmp_path: Path) -> None:
    from edgetwin.errors import InputError

    path = tmp_path / "decoder_latency.csv"
    path.write_text(",".join(DECODER_LATENCY_COLUMNS) + "\n2,1,16,1,0,30.0,5.0\n")
    with pytest.raises(InputError, match=r"output_tokens.*line 2"):
        read_decoder_latency(path)


@pytest.mark.timeout(180)
def test_real_generations_write_the_decoder_trace(tmp_path: Path) -> None:
    """Two real one-rank launches (1 and 2 layers of a small decoder)."""
    from edgetwin.calibration.machine_traces import DecoderMeasurement, write_decoder_latency

    small = DecoderSpec(**MODEL)
    plan = DecoderMeasurement(small, (1, 2), (1,), (8,), 3, 2, 0)
    write_decoder_latency(tmp_path / "decoder_latency.csv", plan)
    records = read_decoder_latency(tmp_path / "decoder_latency.csv")
    assert [(r.layers, r.rep) for r in records] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert all(r.ttft_ms > 0 and r.tpot_ms > 0 for r in records)
    assert {(r.batch, r.prompt_tokens, r.output_tokens) for r in records} == {(1, 8, 3)}
