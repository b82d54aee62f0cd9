"""Prediction intervals: twin rows' <metric>_lo/_hi, the not-known band, nested coverage."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import pytest

import edgetwin
from edgetwin.calibration.held_out import nested_coverage, residuals_by_group
from edgetwin.calibration.reference_holdout import leave_one_batch_out_table
from edgetwin.cli import main
from edgetwin.profile import load_profile
from edgetwin.reports.figures import bandwidth_figure
from edgetwin.reports.rows import average_reps
from edgetwin.results import INTERVAL_METRICS, ResultRow
from edgetwin.scenario import Scenario, load_scenario
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.intervals import NOT_KNOWN_FACTOR, log_half_width
from edgetwin.sim.runner import run_scenario
from tests.conftest import REPO
from tests.test_scenario_errors import (
    Case,
    _listing,
    assert_clean_failure,
    bad_profile_text,
    scenario_text,
)

LOOPBACK = REPO / "scenarios" / "h200_loopback.yaml"
JETSON_SPEC = REPO / "edgetwin" / "calibration" / "specs" / "jetson_orin_nano.yaml"
SMALL = ["sweeps.0.batch=[1, 8]"]


def twin_rows(scenario: Scenario, path: Path = LOOPBACK) -> list[ResultRow]:
    return [o.row for o in run_scenario(scenario, build_fleet(scenario, path))]


@pytest.mark.timeout(120)
def test_twin_rows_get_bands_that_hold_their_values_and_change_nothing_else() -> None:
    plain = twin_rows(load_scenario(LOOPBACK, SMALL))
    banded = twin_rows(load_scenario(LOOPBACK, [*SMALL, "intervals=0.9"]))
    assert all(row.total_ms_lo is None and row.interval_not_known is None for row in plain)
    for before, after in zip(plain, banded, strict=True):
        for metric in INTERVAL_METRICS:
            value, low, high = (getattr(after, f) for f in (metric, f"{metric}_lo", f"{metric}_hi"))
            assert low is not None and high is not None
            assert low <= value <= high, (metric, after)
        # the existing columns are the same numbers
        added = {f"{m}_{end}" for m in INTERVAL_METRICS for end in ("lo", "hi")}
        added.add("interval_not_known")
        kept = {k: v for k, v in asdict(after).items() if k not in added}
        assert kept == {k: v for k, v in asdict(before).items() if k not in added}
        # the H200 traces held out compute, staging and comm; not the power model
        assert after.interval_not_known == "energy_j"
        assert after.energy_j_hi >= after.energy_j * NOT_KNOWN_FACTOR
        assert after.energy_j_lo <= after.energy_j / NOT_KNOWN_FACTOR
        assert after.compute_ms_hi < 2 * after.compute_ms  # a known band is narrow
    distributed = [r for r in banded if r.devices > 1]
    assert distributed and all(r.comm_ms_lo < r.comm_ms < r.comm_ms_hi for r in distributed)
    again = twin_rows(load_scenario(LOOPBACK, [*SMALL, "intervals=0.9"]))
    assert again == banded  # same seed, same intervals


# (scenario, overrides that keep it small, the metrics whose band is the not-known one)
OTHER_KINDS = [
    (  # a crowd row: phone profiles hold no held-out fits, so every band is not known
        "crowdio_android.yaml",
        ["repetitions=1"],
        {"compute_ms", "staging_ms", "comm_ms", "energy_j", "total_ms"},
    ),
    (  # a decoder row: memory-bound decode steps on a vendor bandwidth, not fitted
        "llm_smoke.yaml",
        ["workload.output_tokens=4", "sweeps=[{batch: [1], devices: [2]}]"],
        {"compute_ms", "total_ms"},
    ),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("name", "small", "not_known"), OTHER_KINDS)
def test_crowd_and_decoder_rows_get_bands_too(
    name: str, small: list[str], not_known: set[str]
) -> None:
    """Issue 15 asks for the bands on every shipped twin scenario, not only the ViT's."""
    path = REPO / "scenarios" / name
    plain = edgetwin.run(path, overrides=small).rows
    banded = edgetwin.run(path, overrides=[*small, "intervals=0.9"]).rows
    assert len(banded) == len(plain) > 0
    added = {f"{m}_{end}" for m in INTERVAL_METRICS for end in ("lo", "hi")}
    added.add("interval_not_known")
    for before, after in zip(plain, banded, strict=True):
        for metric in INTERVAL_METRICS:
            value, low, high = (getattr(after, f) for f in (metric, f"{metric}_lo", f"{metric}_hi"))
            assert low is not None and high is not None, (metric, after)
            assert low <= value <= high, (metric, after)
        assert set((after.interval_not_known or "").split(";")) == not_known, after
        kept = {k: v for k, v in asdict(after).items() if k not in added}
        assert kept == {k: v for k, v in asdict(before).items() if k not in added}


@pytest.mark.timeout(120)
def test_a_higher_level_gives_a_wider_band() -> None:
    narrow = twin_rows(load_scenario(LOOPBACK, [*SMALL, "intervals=0.5"]))
    wide = twin_rows(load_scenario(LOOPBACK, [*SMALL, "intervals=0.95"]))
    for a, b in zip(narrow, wide, strict=True):
        assert b.total_ms_lo < a.total_ms_lo and b.total_ms_hi > a.total_ms_hi


@pytest.mark.timeout(60)
def test_a_profile_without_residuals_gets_the_not_known_band(tmp_path: Path) -> None:
    profile = load_profile("h200_loopback")
    bare = profile.model_copy(update={"fit": {}})  # a hand-written profile: no fit at all
    scenario = load_scenario(LOOPBACK, [*SMALL, "intervals=0.9"])
    devices = tuple(d.model_copy(update={"profile": bare}) for d in scenario.devices)
    rows = twin_rows(scenario.model_copy(update={"devices": devices}))
    for row in rows:
        for metric in ("compute_ms", "energy_j", "total_ms"):
            value = getattr(row, metric)
            assert getattr(row, f"{metric}_lo") == pytest.approx(value / NOT_KNOWN_FACTOR)
            assert getattr(row, f"{metric}_hi") == pytest.approx(value * NOT_KNOWN_FACTOR)
        assert row.interval_not_known is not None
        assert {"compute_ms", "energy_j", "total_ms"} <= set(row.interval_not_known.split(";"))


def test_conformal_rank_and_the_small_sample_bound() -> None:
    residuals = [(-1) ** k * k / 100 for k in range(1, 20)]  # |r| = 0.01 .. 0.19
    assert log_half_width(residuals, 0.9) == pytest.approx(0.18)  # rank ceil(20 x 0.9) = 18
    few = [0.1, -0.1, 0.1, -0.1]  # rank 5 > 4: Student-t with 4 d.o.f. x rms 0.1
    assert log_half_width(few, 0.9) == pytest.approx(2.1318 * 0.1, rel=1e-3)
    assert log_half_width([0.1], 0.9) is None


def test_coverage_never_uses_the_points_own_residual() -> None:
    """Three groups fitted well and one badly: the bad group's band comes from the other
    three (narrow), so its repetitions fall outside; theirs, from a set with the bad one,
    are covered."""

    def point(group: float, reps: list[float]) -> dict[str, object]:
        return {"metric": "comm_ms", "held_out": group, "predicted": 10.0, "reps": reps}

    good = [10.1, 9.9, 10.2, 9.8, 10.05]
    points = [point(g, good) for g in (1, 2, 3)] + [point(4, [20.0, 21.0, 19.0, 20.5, 22.0])]
    coverage = nested_coverage(points, level=0.9)["comm_ms"]
    assert coverage["repetitions"] == 20 and coverage["groups"] == 4
    assert coverage["coverage_pct"] == pytest.approx(75.0)


def test_coverage_says_where_its_band_misses() -> None:
    """A coverage near 90 % hid where the band missed: h200_loopback's staging was 86.6 %
    over its four batches, and 50 % with batch 1 held out (the rest 96-100 %). Validate's
    line and page say how many repetitions fell below and above their band, and the value
    held out whose repetitions it covers least."""
    from edgetwin.calibration.held_out import coverage_text, with_coverage

    def point(group: float, reps: list[float]) -> dict[str, object]:
        return {"metric": "staging_ms", "held_out": group, "predicted": 10.0, "reps": reps}

    good = [10.1, 9.9, 10.2, 9.8, 10.05]
    points = [point(g, good) for g in (1, 2, 8)] + [point(32, [20.0, 21.0, 19.0, 20.5, 22.0])]
    coverage = nested_coverage(points, level=0.9)["staging_ms"]
    assert (coverage["below"], coverage["above"]) == (0, 5)
    assert (coverage["least_pct"], coverage["least_held_out"]) == (0.0, 32.0)
    stats = with_coverage({"staging_ms": {"points": 4}}, {"staging_ms": coverage})["staging_ms"]
    assert coverage_text(stats, "batch") == (
        ", 90 % interval covers 75.0 % of 20 held-out repetitions (0 below, 5 above; least"
        " 0.0 % with batch size 32 held out)"
    )


@pytest.mark.timeout(120)
def test_jetson_coverage_from_its_leave_one_batch_out_fits() -> None:
    points = leave_one_batch_out_table(JETSON_SPEC).points
    coverage = nested_coverage(points)
    residuals = residuals_by_group(points)
    for metric in INTERVAL_METRICS:
        # recount by hand: each point against the band of the other batches' residuals
        inside = 0
        held = [p for p in points if p["metric"] == metric]
        for p in held:
            others = [r for g, rs in residuals[metric].items() if g != p["held_out"] for r in rs]
            q = log_half_width(others, 0.9)
            assert q is not None
            inside += abs(math.log(p["reps"][0] / p["predicted"])) <= q
        assert coverage[metric]["coverage_pct"] == pytest.approx(100 * inside / len(held), abs=0.1)
    profile = load_profile("jetson_orin_nano")
    kept = profile.fit["held_out"]["log_residuals"]
    assert set(kept) == set(INTERVAL_METRICS)  # the shipped profile keeps them all


@pytest.mark.timeout(120)
def test_validate_prints_and_writes_coverage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(JETSON_SPEC), "--out", str(tmp_path / "v")]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((tmp_path / "v" / "validation.json").read_text())
    for metric in INTERVAL_METRICS:
        line = next(line for line in printed.splitlines() if line.startswith(f"{metric}:"))
        assert "90 % interval covers" in line
        assert f"{summary[metric]['coverage_90_pct']:.1f} %" in line
    page = (tmp_path / "v" / "validation.html").read_text()
    assert "90 % interval coverage" in page
    for metric in INTERVAL_METRICS:  # a share of the held-out runs, not "90.0 of 10"
        stats = summary[metric]
        covered = f"{stats['coverage_90_pct']:.1f} % of {stats['coverage_repetitions']} repetitions"
        assert f"<td>{covered} (" in page  # then where it misses


SPECS = REPO / "edgetwin" / "calibration" / "specs"


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("spec", "by"),
    [("h200_loopback", "batch"), ("h200_netns", "batch"), ("h200_netns", "bandwidth"),
     ("jetson_orin_nano", "batch")],
)  # fmt: skip
def test_held_out_coverage_of_every_trace_fitted_profile_is_80_to_97_pct(
    spec: str, by: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Issue 15's acceptance, as docs/calibration.md ("Coverage on the held-out points")
    states it; its one exception, Jetson energy at 7 of 7, is too few points to land
    in between (the next count down is 85.7 %), and the test says so rather than pass it.
    The Jetson table's and the shaped link's by bandwidth are the session's validate runs
    of them (tests/conftest.py), which other tests read too."""
    shared = {
        ("jetson_orin_nano", "batch"): ("jetson_table_validation", "held_out"),
        ("h200_netns", "bandwidth"): ("netns_bandwidth_validation", "v"),
    }
    if (spec, by) in shared:
        fixture, name = shared[spec, by]
        out = request.getfixturevalue(fixture).folder / name
    else:
        out = tmp_path / "v"
        assert main(["validate", str(SPECS / f"{spec}.yaml"), "--by", by, "--out", str(out)]) == 0
    summary = json.loads((out / "validation.json").read_text())
    covered = {m: s for m, s in summary.items() if "coverage_90_pct" in s}
    assert covered, summary
    for metric, scores in covered.items():
        if (spec, metric) == ("jetson_orin_nano", "energy_j"):
            assert scores["coverage_repetitions"] == 7 and scores["coverage_90_pct"] == 100.0
            continue
        assert 80.0 <= scores["coverage_90_pct"] <= 97.0, (metric, scores)


@pytest.mark.timeout(120)
def test_the_report_draws_the_bands_as_error_bars() -> None:
    """The bandwidth figure draws each point's band as its error bar. Two batches at two
    bandwidths of h200_bw's sweep (it has 4 x 8) draw a line per configuration and batch as
    the whole sweep does: each point's bar comes from its own band."""
    sweep = "sweeps=[{batch: [1, 8], bandwidth_mbps: [200, 800]}]"
    scenario = load_scenario(REPO / "scenarios" / "h200_bw.yaml", ["intervals=0.9", sweep])
    rows = twin_rows(scenario, REPO / "scenarios" / "h200_bw.yaml")
    points = average_reps(rows)
    figure = bandwidth_figure(points)
    assert figure is not None
    drawn = [trace for trace in figure.data if trace.error_y.arrayminus is not None]
    assert drawn
    trace = drawn[0]
    point = next(p for p in points if p.total_ms == trace.y[0])
    assert point.total_band_ms is not None
    assert trace.error_y.arrayminus[0] == pytest.approx(point.total_ms - point.total_band_ms[0])
    assert trace.error_y.array[0] == pytest.approx(point.total_band_ms[1] - point.total_ms)


@pytest.mark.parametrize(("value", "problem"), [(1.5, "less than 1"), (0, "greater than 0")])
@pytest.mark.parametrize("given_by", ["file", "--set"])
def test_a_bad_level_exits_2_naming_the_file_and_field(
    value: float, problem: str, given_by: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    in_file = given_by == "file"
    text = scenario_text(intervals=value) if in_file else scenario_text()
    case = Case("bad-level", text, ("intervals", problem))
    (tmp_path / "scenario.yaml").write_text(text)
    before = _listing(tmp_path)
    args = [] if in_file else ["--set", f"intervals={value}"]
    run = ["run", str(tmp_path / "scenario.yaml"), "--out", str(tmp_path / "out"), "--quiet"]
    code = main([*run, *args])
    assert_clean_failure(code, capsys.readouterr().err, case, before, tmp_path)


def test_malformed_held_out_residuals_name_the_profile_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = bad_profile_text(fit__held_out__log_residuals__compute_ms=[0.1, 0.2])  # no groups
    text = scenario_text(devices__0__profile="bad_profile.yaml", intervals=0.9)
    case = Case("bad-held-out", text, ("'fit'", "held_out.log_residuals"), names="bad_profile.yaml")
    (tmp_path / "scenario.yaml").write_text(text)
    (tmp_path / "bad_profile.yaml").write_text(bad)
    before = _listing(tmp_path)
    run = ["run", str(tmp_path / "scenario.yaml"), "--out", str(tmp_path / "out"), "--quiet"]
    assert_clean_failure(main(run), capsys.readouterr().err, case, before, tmp_path)
