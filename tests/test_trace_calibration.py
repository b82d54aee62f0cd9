"""Profiles from hardware traces: the H200 loopback fit and its held-out check."""

from __future__ import annotations

import csv
import os
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgetwin.calibration.held_out import HeldOutRefits
from edgetwin.calibration.readers.staged_exchange import BANDWIDTH_FILE, read_staged_allgather
from edgetwin.calibration.trace_fits import Holdout, plan_fits, run_fits
from edgetwin.calibration.trace_holdout import leave_one_out, refit_without
from edgetwin.calibration.trace_inputs import read_inputs
from edgetwin.calibration.trace_profile import calibrate_from_traces
from edgetwin.errors import InputError
from edgetwin.profile import load_profile
from tests.conftest import REPO, PipedRun, loopback_spec_with_exchanges_at_batch_8_only

SPEC = REPO / "edgetwin/calibration/specs/h200_loopback.yaml"
LOOPBACK = REPO / "data/traces/h200-loopback-2026-11"


def test_the_shipped_h200_profile_keeps_its_uncertainty() -> None:
    """(Its bytes are the documented command's: tests/test_shipped_profiles.py.)"""
    shipped = load_profile("h200_loopback")
    assert shipped.fit["sections"]["compute"]["stderr"]["throughput_gflops"] > 0
    assert len(shipped.fit["bootstrap_samples"]["network"]) == 30


@pytest.fixture(scope="module")
def loopback_refits() -> HeldOutRefits:
    """The H200 loopback spec's leave-one-batch-out refits, for the tests that each read a
    different thing of them."""
    return leave_one_out(SPEC, "batch")


@pytest.mark.timeout(120)
def test_each_residual_names_its_trace_column_and_what_was_measured(
    loopback_refits: HeldOutRefits,
) -> None:
    """A residual's point was its group's internal key (``d2h 100000.0 8 98 2408448``: a
    loopback link at a nominal 100000.0 Mbit/s), which the decoder fit parsed back for
    its metric. Each names the trace column it fits (``metric``) and what its rows
    measured, in validate's words (one labelling of a point, shared)."""
    inputs = read_inputs(SPEC)
    spec = inputs.spec.model_copy(update={"bootstrap": 0})
    fits = run_fits(SPEC, spec, inputs.data, plan_fits(spec, inputs.data))
    named = {name: {(r["metric"], r["point"]) for r in fit.residuals} for name, fit in fits.items()}
    piece = "batch 8, 98 rows a rank (2408448 bytes), loopback"
    assert ("latency_ms", "vit_full, batch 8, 197 tokens") in named["compute"]
    assert {("d2h_ms", piece), ("h2d_ms", piece)} <= named["staging"]
    assert ("comm_ms", piece) in named["network"]
    assert ("latency_ms", "h2d, 245760 bytes") in named["copy_pinned"]
    validated = {p["point"] for p in loopback_refits.points}
    fitted = {point for name in ("compute", "staging", "network") for _, point in named[name]}
    assert fitted <= validated


def test_unseen_batches_are_predicted_within_ten_percent(loopback_refits: HeldOutRefits) -> None:
    points = loopback_refits.points
    for metric, count in (("vit_full_ms", 4), ("exchange_total_ms", 16)):
        errors = [abs(p["error_pct"]) for p in points if p["metric"] == metric]
        assert len(errors) == count
        assert float(np.median(errors)) < 10.0, metric


@pytest.mark.timeout(120)
def test_a_held_out_batch_that_leaves_a_section_no_record_says_so(tmp_path: Path) -> None:
    """Exchanges measured at batch 8 alone: leaving batch 8 out leaves staging and network
    nothing to refit, so it has no exchange points (and a warning), while its compute
    points stay."""
    spec = loopback_spec_with_exchanges_at_batch_8_only(tmp_path)
    refits = leave_one_out(spec, "batch")
    held_at_8 = {p["metric"] for p in refits.points if p["held_out"] == 8}
    assert "compute_ms" in held_at_8 and "exchange_total_ms" not in held_at_8
    assert refits.warnings == [
        "validation: batch 8 gives no held-out exchange points: without it,"
        " gloo_staged_allgather.csv holds no record to refit"
        " staging from"
    ]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("folders", "named"),
    [
        (("h200-loopback-2026-11",), "gloo_staged_allgather.csv holds"),
        (("h200-netns-bw-2026-11",), "gloo_staged_allgather_bw.csv holds"),
        (
            ("h200-loopback-2026-11", "h200-netns-bw-2026-11"),
            "gloo_staged_allgather.csv and gloo_staged_allgather_bw.csv hold",
        ),
    ],
    ids=["loopback", "shaped", "both"],
)
def test_a_skipped_refit_names_the_exchange_files_the_folder_holds(
    tmp_path: Path, folders: tuple[str, ...], named: str
) -> None:
    """Exchanges at batch 8 alone, in the loopback file, the shaped-link file or both: the
    warning of the refit without batch 8 named both files whatever the folder held
    ('gloo_staged_allgather.csv or gloo_staged_allgather_bw.csv holds no record'); it
    names those the folder holds, which are the ones left without a record."""
    import yaml

    traces = tmp_path / "traces"
    traces.mkdir()
    for folder in folders:
        for shipped in (REPO / "data/traces" / folder).glob("gloo_staged_allgather*.csv"):
            header, *rows = shipped.read_text().splitlines()
            batch = header.split(",").index("batch")
            kept = [row for row in rows if row.split(",")[batch] == "8"]
            (traces / shipped.name).write_text("\n".join([header, *kept]) + "\n")
    spec = yaml.safe_load(SPEC.read_text())
    spec |= {"traces": str(traces), "fit": ["staging"], "base": "h200_loopback", "bootstrap": 0}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert leave_one_out(path, "batch").warnings == [
        f"validation: batch 8 gives no held-out exchange points: without it, {named} no"
        " record to refit staging from"
    ]


def test_missing_trace_folder_is_a_clear_error(tmp_path: Path) -> None:
    from edgetwin.errors import InputError

    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.read_text().replace("../../../data/traces/", str(tmp_path) + "/nope/"))
    with pytest.raises(InputError, match="no trace folder at") as raised:
        calibrate_from_traces(spec, "test")
    assert (raised.value.path, raised.value.field) == (str(spec), "traces")


def test_validate_command_writes_held_out_errors(jetson_table_validation: PipedRun) -> None:
    """``validate`` of the Jetson table spec: the session's run (tests/test_cli_guide.py
    checks its progress lines)."""
    import json

    out = jetson_table_validation.folder / "held_out"
    summary = json.loads((out / "validation.json").read_text())
    assert summary["total_ms"]["points"] == 10  # every reference row predicted once, unseen
    assert summary["total_ms"]["median_abs_error_pct"] < 5.0
    assert (out / "validation.html").stat().st_size > 100_000  # plotly inlined
    assert (out / "validation.csv").read_text().startswith("metric,point,")


def test_sampling_the_bootstrap_gives_prediction_intervals() -> None:
    from edgetwin.scenario import load_scenario
    from edgetwin.sim.fleet import build_fleet
    from edgetwin.sim.runner import run_scenario

    path = REPO / "scenarios/h200_loopback.yaml"
    overrides = ["repetitions=4", "sweeps=[{batch: [8]}]", "strategies=[{name: voltage}]"]

    def totals(extra: list[str]) -> list[float]:
        scenario = load_scenario(path, overrides + extra)
        return [o.row.total_ms for o in run_scenario(scenario, build_fleet(scenario, path))]

    point = totals([])
    sampled = totals(["sample_profiles=true"])
    assert len(set(point)) == 1
    assert len(set(sampled)) == 4 and sampled == totals(["sample_profiles=true"])
    assert min(sampled) < point[0] * 1.05 and max(sampled) > point[0] * 0.95


def test_calibrate_machine_profiles_this_machine(
    tmp_path: Path, quick_machine_calibration: PipedRun
) -> None:
    """``calibrate-machine --quick`` measures this machine and fits a profile the twin runs.
    The session's one run (tests/test_cli_guide.py checks its progress lines' names)."""
    from edgetwin.calibration.machine import QUICK, calibration_steps
    from edgetwin.scenario import load_scenario
    from edgetwin.sim.fleet import build_fleet
    from edgetwin.sim.runner import run_scenario

    out = quick_machine_calibration.folder / "machine"
    err = quick_machine_calibration.stderr
    steps = [line for line in err.splitlines() if "calibrate-machine" in line]
    total = calibration_steps(QUICK)
    assert len(steps) == total and steps[-1] == f"calibrate-machine: {total}/{total} (fit)"
    assert sum("(decoder: " in line for line in steps) == total - 3  # a line per launch
    profile = load_profile(str(out / "profile.yaml"))
    assert profile.compute.throughput_gflops > 0
    # the machine's memory in the MB (10^6 bytes) the twin counts in: it was MiB, 4.9 % less
    physical_bytes = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert profile.ram_mb == pytest.approx(physical_bytes / 1e6, abs=1)
    assert {"compute", "staging", "network", "memory"} <= set(profile.fit["median_abs_error_pct"])
    assert profile.memory is not None and profile.memory.fitted  # from the real decoder
    assert profile.fit["method"].endswith("power fixed in the spec")  # no power meter here
    # each batch left out leaves the staging and network refits enough exchange shapes
    assert "warnings" not in profile.fit["held_out"]
    assert {"staging_ms", "comm_ms"} <= set(profile.fit["held_out"]["log_residuals"])
    traces = out / "traces"
    assert (traces / "vit_latency.csv").read_text().startswith("kernel,batch,tokens,rep,")
    assert (traces / "decoder_latency.csv").read_text().startswith("layers,batch,prompt_tokens,")
    # the fitted profile drives the twin as any shipped one does
    scenario_path = tmp_path / "here.yaml"
    scenario_path.write_text(
        "name: here\nmodel: {tokens: 65, width: 192, blocks: 4, heads: 3}\n"
        f"devices: [{{name: me, profile: {out}/profile.yaml, count: 2}}]\n"
        "strategies: [{name: single}, {name: prism, segments: [4]}]\n"
    )
    scenario = load_scenario(scenario_path)
    rows = [o.row for o in run_scenario(scenario, build_fleet(scenario, scenario_path))]
    assert all(r.status == "ok" and r.total_ms > 0 for r in rows)


@pytest.mark.parametrize("quick", [True, False], ids=["quick", "full"])
def test_calibrate_machine_measures_the_exchange_shapes_its_fits_need(quick: bool) -> None:
    """--quick exchanged 4 and 32 rows at batches 1, 2 and 4: pieces of 3-96 KiB, and its
    spec gave no size above which a copy or a message pays an extra, so large_copy_ms and
    large_message_ms changed no prediction and kept their fits' start (0.05 ms); and each
    batch left out left 4 shapes for 5 parameters, so the profile had no held-out staging
    or comm errors. The spec sets the size (128 KiB), pieces and gathered tensors lie on
    both sides of it, and each batch left out leaves as many shapes as either fit has
    parameters."""
    from edgetwin.calibration.machine import FULL, QUICK, machine_spec
    from edgetwin.calibration.trace_predictors import NETWORK_BOUNDS, STAGING_BOUNDS

    plan = QUICK if quick else FULL
    fixed = machine_spec(plan)["fixed"]
    element = plan.model.width * plan.model.bytes_per_element
    pieces = {(b, rows): b * rows * element for b in plan.batches for rows in plan.exchange_rows}
    for section, bounds in (("staging", STAGING_BOUNDS), ("network", NETWORK_BOUNDS)):
        free = [name for name in bounds if f"{section}.{name}" not in fixed]
        for left_out in plan.batches:
            assert sum(b != left_out for b, _rows in pieces) >= len(free), (section, left_out)
    copies = [*pieces.values(), *(2 * piece for piece in pieces.values())]  # d2h, h2d
    for key, sizes in (
        ("staging.large_copy_kb", copies),
        ("network.large_message_kb", pieces.values()),
    ):
        assert min(sizes) <= fixed[key] * 1024 < max(sizes), key


@pytest.mark.timeout(120)
def test_a_size_step_extra_is_fitted_with_the_size_the_profile_keeps(tmp_path: Path) -> None:
    """A staging fit from the H200 loopback trace on a base profile, without the size of the
    large-copy extra in its spec: the fit ran without a size, so large_copy_ms changed no
    prediction and was written at its start (0.05 ms) beside the base's 128 KiB. It is
    fitted with the base's size, as if the spec fixed it; a base without one has no extra
    (0), not a parameter the data must pin."""
    import yaml

    def staging(base: str, fixed: dict[str, float]) -> dict[str, Any]:
        spec = {"kind": "traces", "profile": {"name": "b", "ram_mb": 1000}}
        spec |= {"traces": str(LOOPBACK), "base": base, "fit": ["staging"], "bootstrap": 0}
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump({**spec, "fixed": fixed}))
        return calibrate_from_traces(path, "test").staging.model_dump()

    assert staging("h200_loopback", {}) == staging("h200_loopback", {"staging.large_copy_kb": 128})
    no_size = yaml.safe_load(
        (REPO / "edgetwin/calibration/profiles/h200_loopback.yaml").read_text()
    )
    no_size["staging"]["large_copy_kb"] = None
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(no_size))
    fitted = staging(str(tmp_path / "base.yaml"), {})
    assert (fitted["large_copy_kb"], fitted["large_copy_ms"]) == (None, 0.0)


def _jtop_copy_of_the_nvml_log(folder: Path) -> Path:
    """The H200 NVML log as a jtop log: time in s, ``Power TOT`` in mW, the same phases."""
    rows = list(csv.DictReader((LOOPBACK / "power_samples.csv").open()))
    lines = ["time,Power TOT,phase"]
    lines += [f"{r['t_s']},{Decimal(r['power_w']) * 1000},{r['phase']}" for r in rows]
    folder.mkdir()
    (folder / "tegrastats.csv").write_text("\n".join(lines) + "\n")
    return folder / "tegrastats.csv"


def _power_spec(tmp_path: Path, folder: Path) -> Path:
    spec = tmp_path / "spec.yaml"
    base = REPO / "edgetwin/calibration/profiles/h200_loopback.yaml"
    spec.write_text(
        f"kind: traces\nprofile: {{name: board, ram_mb: 8000}}\ntraces: {folder}\n"
        f"base: {base}\nfit: [power]\nbootstrap: 0\n"
    )
    return spec


@pytest.mark.timeout(60)
def test_a_jtop_log_gives_the_power_section_as_the_nvml_log_does(tmp_path: Path) -> None:
    """A jtop log in the traces folder was never read: a spec fitting power from one was
    refused ('holds no power_samples.csv'), and without 'fit' the powers came from the base
    without a word, though the docs say a board's jtop log fits them."""
    log = _jtop_copy_of_the_nvml_log(tmp_path / "traces")
    profile = calibrate_from_traces(_power_spec(tmp_path, log.parent), "test")
    nvml = load_profile("h200_loopback").power.model_dump()
    assert profile.power.model_dump() == pytest.approx(nvml, abs=1e-3)
    assert profile.fit["method"].endswith("power = mean of labelled jtop samples")
    assert [source["file"] for source in profile.fit["sources"]] == ["tegrastats.csv"]


@pytest.mark.timeout(60)
def test_a_broken_or_second_power_log_is_named(tmp_path: Path) -> None:
    from edgetwin.errors import InputError

    log = _jtop_copy_of_the_nvml_log(tmp_path / "traces")
    spec = _power_spec(tmp_path, log.parent)
    text = log.read_text().splitlines()
    log.write_text("\n".join([*text[:3], text[3].replace(",", ",x", 1), *text[4:]]) + "\n")
    with pytest.raises(InputError, match="line 4") as raised:
        calibrate_from_traces(spec, "test")
    assert (raised.value.path, raised.value.field) == (str(log), "Power TOT")
    shutil.copy(LOOPBACK / "power_samples.csv", log.parent)
    with pytest.raises(InputError, match=r"2 power logs \(power_samples.csv, tegrastats.csv\)"):
        calibrate_from_traces(spec, "test")


def test_every_fitted_parameter_stays_in_the_profiles_range() -> None:
    """A fitted value lies within its least-squares bounds, so bounds inside the range the
    profile takes keep every fit a profile (a value out of it was a pydantic traceback);
    a value measured, not fitted (the link share), is checked where it is read."""
    from edgetwin.calibration import fit_decoder, fit_emu, reference_inputs, trace_predictors
    from edgetwin.calibration.profile_io import FIXABLE_SECTIONS, out_of_range
    from edgetwin.profile import MemoryParams

    sections = {**FIXABLE_SECTIONS, "memory": MemoryParams}
    bounds = [
        (path, low, high)
        for path, low, high, _ in (*reference_inputs.TABLE_PARAMETERS, *fit_emu.EMU_PARAMETERS)
    ]
    for section, named in (
        ("compute", trace_predictors.COMPUTE_BOUNDS),
        ("staging", trace_predictors.STAGING_BOUNDS),
        ("network", trace_predictors.NETWORK_BOUNDS),
        ("memory", fit_decoder.MEMORY_BOUNDS),
    ):
        bounds += [(f"{section}.{name}", low, high) for name, (low, high, _) in named.items()]
    for path, low, high in bounds:
        section, _, name = path.partition(".")
        for value in (low, high):
            assert out_of_range(sections[section], name, value) is None, (path, value)


@pytest.mark.timeout(120)
def test_a_held_out_exchange_is_predicted_without_its_own_copy_times(tmp_path: Path) -> None:
    """On a shaped link the tokens a message finds refill while the copies run: a held-out
    exchange's comm is predicted with the refit's copy times, never its own measured ones
    (which are what is predicted). Doubling batch 8's measured copies changes no
    prediction of batch 8 held out. Only batch 8's refit of the leave-one-out runs (the
    one ``leave_one_out`` makes for it: the other batches' refits predict other points)."""
    netns = REPO / "edgetwin/calibration/specs/h200_netns.yaml"
    shipped_traces = "../../../data/traces/h200-netns-bw-2026-11"

    def batch_8_predictions(folder: Path) -> dict[tuple[str, str], float]:
        spec = folder.parent / f"{folder.name}.yaml"
        spec.write_text(netns.read_text().replace(shipped_traces, str(folder)))
        points = refit_without(spec, read_inputs(spec), Holdout("batch", 8)).points
        assert {p["held_out"] for p in points} == {8}
        return {(p["metric"], p["point"]): p["predicted"] for p in points}

    traces = tmp_path / "slow_copies"
    shutil.copytree(REPO / "data/traces/h200-netns-bw-2026-11", traces)
    exchanges = traces / "gloo_staged_allgather_bw.csv"
    with exchanges.open(newline="") as file:
        rows = list(csv.DictReader(file))
    for row in rows:
        if row["batch"] == "8":
            for phase in ("d2h_ms", "h2d_ms"):
                row[phase] = str(2 * float(row[phase]))
    with exchanges.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    slowed = batch_8_predictions(traces)
    assert {metric for metric, _ in slowed} == {"exchange_total_ms", "staging_ms", "comm_ms"}
    shutil.copytree(REPO / "data/traces/h200-netns-bw-2026-11", tmp_path / "as_traced")
    assert slowed == batch_8_predictions(tmp_path / "as_traced")


@pytest.mark.timeout(300)
def test_a_long_exchange_loop_is_replayed_to_its_steady_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The network fit replays the traced loop for every prediction, every block of it: a
    trace of 10,000 blocks (the most one may have) replayed 20,000 messages a group, for
    each of some 130 predictions a solve, 35 solves a calibrate. A block that leaves the
    channel's token bucket as it found it begins a steady state, which every later block
    repeats: the replay stops there, and predicts what the whole loop gives (at 1,000
    blocks the warm-up forward already ends in it; the netns groups reach it within 160)."""
    from edgetwin.calibration import exchange_replay, trace_groups

    sent = []

    class CountedChannel(exchange_replay.Channel):
        def send(self, *args: Any, **kwargs: Any) -> Any:
            sent.append(1)
            return super().send(*args, **kwargs)

    monkeypatch.setattr(exchange_replay, "Channel", CountedChannel)
    netns = REPO / "edgetwin/calibration/specs/h200_netns.yaml"
    exchanges = read_inputs(netns).data.exchanges
    gaps = trace_groups.exchange_gaps(exchanges)
    params = load_profile("h200_netns").network.model_dump()
    predict = exchange_replay.network_predictor(
        {(*key[:-1], n): gap for key, gap in gaps.items() for n in (1_000, 10_000)}, 256
    )
    for key in gaps:
        long, longer = (*key[:-1], 1_000), (*key[:-1], 10_000)
        assert predict(params, long) == pytest.approx(predict(params, longer), rel=1e-6)
        sent.clear()
        predict(params, longer)
        assert len(sent) < 400, key


def _write_rows(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _as_blocks(rows: list[dict[str, str]], blocks: int) -> None:
    """Rows of a 12-block loop as the same exchanges timed over ``blocks`` blocks: the
    summed columns scaled, each block's times as they were."""
    for row in rows:
        for column in ("d2h_ms", "comm_ms", "h2d_ms", "total_ms"):
            row[column] = repr(float(row[column]) * blocks / int(row["blocks"]))
        row["blocks"] = str(blocks)


@pytest.mark.timeout(300)
def test_each_exchange_file_is_replayed_with_its_own_blocks(tmp_path: Path) -> None:
    """A loopback trace of 12-block forwards beside a shaped-link one: timed over 6 blocks
    instead of 12 (each block as it was), a held-out shaped exchange's staging is
    predicted at half (the fit and the held-out predictions took the first row's 12
    blocks for every group, and predicted it whole)."""
    netns = REPO / "edgetwin/calibration/specs/h200_netns.yaml"
    shipped = "../../../data/traces/h200-netns-bw-2026-11"

    def staging_predictions(blocks: int) -> dict[str, float]:
        traces = tmp_path / f"{blocks}_blocks"
        traces.mkdir()
        shutil.copy(LOOPBACK / "gloo_staged_allgather.csv", traces)
        with (REPO / shipped.removeprefix("../../../") / BANDWIDTH_FILE).open() as file:
            shaped = list(csv.DictReader(file))
        _as_blocks(shaped, blocks)
        _write_rows(traces / BANDWIDTH_FILE, shaped)
        spec = tmp_path / f"{blocks}_blocks.yaml"
        spec.write_text(netns.read_text().replace(shipped, str(traces)))
        points = leave_one_out(spec, "bandwidth").points
        return {p["point"]: p["predicted"] for p in points if p["metric"] == "staging_ms"}

    whole, half = staging_predictions(12), staging_predictions(6)
    assert whole.keys() == half.keys() and whole
    assert half == {point: pytest.approx(ms / 2, abs=1e-4) for point, ms in whole.items()}


def test_an_exchange_file_of_two_loops_names_the_first_other_blocks(tmp_path: Path) -> None:
    """A file whose rows time loops of 12 and 6 blocks is refused at its first 6-block
    row: its groups' residuals do not name their blocks, and would read as one loop's."""
    with (LOOPBACK / "gloo_staged_allgather.csv").open() as f:
        rows = list(csv.DictReader(f))
    _as_blocks(rows[len(rows) // 2 :], 6)
    path = tmp_path / "gloo_staged_allgather.csv"
    _write_rows(path, rows)
    with pytest.raises(InputError) as raised:
        read_staged_allgather(path)
    assert (raised.value.path, raised.value.field) == (str(path), "blocks")
    line = len(rows) // 2 + 2
    assert (
        raised.value.problem == f"line {line}: 6 blocks where line 2 has 12: a file times one loop"
    )


@pytest.mark.timeout(120)
def test_staging_fitted_with_the_network_from_a_base_has_held_out_errors(tmp_path: Path) -> None:
    """A spec that fits staging and takes its network from a base profile: the refits
    predicted no staged exchange (its points needed both sections), so the profile had no
    held-out staging errors and a twin run with intervals the not-known band, [m / 10,
    m x 10]. The copies need the staging refit alone; comm stays the base's."""
    import yaml

    from edgetwin.calibration.fit_check import not_held_out

    spec = yaml.safe_load(SPEC.read_text())
    spec |= {"traces": str(LOOPBACK), "fit": ["staging"], "base": "h200_loopback"}
    spec |= {"bootstrap": 0}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    profile = calibrate_from_traces(path, "test")
    held_out = profile.fit["held_out"]
    assert sorted(held_out["log_residuals"]["staging_ms"]) == ["1", "2", "32", "8"]
    assert len(held_out["log_residuals"]["staging_ms"]["8"]) == 4 * 20  # 4 shapes, 20 reps
    assert "warnings" not in held_out and not_held_out(profile) == []
    metrics = {p["metric"] for p in leave_one_out(path, "batch").points}
    assert metrics == {"staging_ms"}  # no comm, no exchange total: the network is the base's


@pytest.mark.timeout(180)
def test_too_few_points_left_by_each_batch_is_not_told_to_measure_a_second_batch(
    tmp_path: Path,
) -> None:
    """Exchanges at batches 1 and 8: each refit keeps the other batch's four shapes, too few
    for staging's five parameters. The warning of the metric left without held-out errors
    said to measure a second batch size (calibrate-machine --quick said so of its three);
    it says to measure more batch sizes or shapes, or to fix parameters."""
    import yaml

    from edgetwin.calibration.fit_check import not_held_out_warning

    traces = tmp_path / "traces"
    traces.mkdir()
    exchanges = (LOOPBACK / "gloo_staged_allgather.csv").read_text().splitlines()
    kept = [row for row in exchanges[1:] if row.split(",")[1] in {"1", "8"}]
    (traces / "gloo_staged_allgather.csv").write_text("\n".join([exchanges[0], *kept]) + "\n")
    spec = yaml.safe_load(SPEC.read_text())
    spec |= {"traces": str(traces), "fit": ["staging"], "base": "h200_loopback", "bootstrap": 0}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    profile = calibrate_from_traces(path, "test")
    assert all("too few distinct points" in line for line in profile.fit["held_out"]["warnings"])
    said = not_held_out_warning(profile)
    assert said is not None and said.startswith("the profile has no held-out errors for staging_ms")
    assert "a second batch size" not in said
    assert said.endswith(
        "measure more batch sizes or shapes, or set some of its parameters in "
        "the spec's fixed, and fit again"
    )
