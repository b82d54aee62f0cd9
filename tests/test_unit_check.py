"""A trace column whose times no device the fit takes reaches, or that the power log's clock
or another column of its file contradicts (microseconds in a column read in ms: values
1000x too large) is named with a warning: its file and its column."""

from __future__ import annotations

import csv
import itertools
import shutil
import warnings
from pathlib import Path

import pytest

import edgetwin
from edgetwin.calibration.trace_inputs import TraceData
from edgetwin.calibration.unit_check import slow_columns
from edgetwin.cli import main
from edgetwin.model_spec import ModelSpec
from edgetwin.profile import load_profile
from tests.conftest import REPO

LOOPBACK = REPO / "data/traces/h200-loopback-2026-11"
NETNS = REPO / "data/traces/h200-netns-bw-2026-11"
EXCHANGE_TIMES = ("d2h_ms", "comm_ms", "h2d_ms", "total_ms")
H200 = REPO / "edgetwin/calibration/profiles/h200_loopback.yaml"
JETSON_SLOWER = 60  # a Jetson Orin Nano's ViT-B/16 forward against the H200's (~570 ms at 8)


def _scaled(name: str, folder: Path, columns: dict[str, float], source: Path = LOOPBACK) -> Path:
    """The trace ``name`` of ``source`` (the H200 loopback's) in ``folder``, each of
    ``columns`` times its factor."""
    with (source / name).open() as handle:
        rows = list(csv.DictReader(handle))
    folder.mkdir(exist_ok=True)
    with (folder / name).open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow(row | {c: f"{float(row[c]) * k:.6g}" for c, k in columns.items()})
    return folder / name


@pytest.mark.timeout(300)
@pytest.mark.parametrize("unit_ms", [1.0, 0.001], ids=["ms", "us"])
def test_a_jetsons_latencies_in_microseconds_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], unit_ms: float
) -> None:
    """A Jetson's ViT latencies written in microseconds under latency_ms were read as a
    device 1000x slower, and the fit followed them without a word about the unit (at most
    its parameters at their bounds). The values alone are slower than the slowest device a
    fit takes (10 GFLOP/s, 20 ms a kernel group): a warning names the file and the column
    first, and the profile keeps it; the same trace in ms says nothing of the kind."""
    trace = _scaled("vit_latency.csv", tmp_path / "traces", {"latency_ms": JETSON_SLOWER / unit_ms})
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "kind: traces\nprofile: {name: my_jetson, ram_mb: 8192}\ntraces: traces\n"
        f"model: {{preset: vit_b16}}\nfit: [compute]\nbase: {H200}\nbootstrap: 0\n"
    )
    out = tmp_path / "profile.yaml"
    assert main(["calibrate", str(spec), "--out", str(out), "--quiet"]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "microseconds" in line]
    kept = load_profile(str(out)).fit.get("slow_columns", [])
    if unit_ms == 1.0:
        assert said == [] and kept == []
        return
    assert len(said) == 1 and said[0] == f"edgetwin: warning: {kept[0]}"
    assert kept[0].startswith(f"{trace}: field 'latency_ms': even the fastest group (")
    assert "10 GFLOP/s and 20 ms a kernel group" in kept[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        edgetwin.calibrate(spec)
    assert caught[0].category is edgetwin.UnitWarning and str(caught[0].message) == kept[0]


@pytest.mark.parametrize("unit_ms", [1.0, 0.001], ids=["ms", "us"])
def test_copies_in_microseconds_are_named_by_their_column(tmp_path: Path, unit_ms: float) -> None:
    """A board's GPU->host copies (3x the H200's pageable ones) in microseconds: the d2h_ms
    column of the staged exchange is named; its host->GPU copies, up to 20x a copy for the
    concatenation, and comm_ms (a link's rate, which any value may be) are within a fit's
    bounds, and the file has no power log to time them by."""
    times = {column: 3 / unit_ms for column in EXCHANGE_TIMES}
    trace = _scaled("gloo_staged_allgather.csv", tmp_path, times)
    named = slow_columns(TraceData(tmp_path), ModelSpec())
    if unit_ms == 1.0:
        assert named == []
        return
    assert len(named) == 1 and named[0].startswith(f"{trace}: field 'd2h_ms': even the fastest")
    assert "20 ms + 100 ms/MB a copy" in named[0] and ", a block: " in named[0]


def test_gathered_copies_in_microseconds_are_named(tmp_path: Path) -> None:
    """A Jetson's staged exchange (60x the H200's) in microseconds: its host->GPU copies of
    the gathered tensor, up to 20x a copy for the concatenation, are still past the slowest
    device; h2d_ms was not checked. (The whole file scaled: no column contradicts another.)"""
    times = {column: JETSON_SLOWER / 0.001 for column in EXCHANGE_TIMES}
    _scaled("gloo_staged_allgather.csv", tmp_path, times)
    named = slow_columns(TraceData(tmp_path), ModelSpec())
    assert _columns(named) == {("gloo_staged_allgather.csv", c) for c in ("d2h_ms", "h2d_ms")}
    assert "20x (20 ms + 100 ms/MB a copy) for the gathered tensor" in named[1]


def _columns(lines: list[str]) -> set[tuple[str, str]]:
    """(file name, column) of each line of ``slow_columns``."""
    return {(Path(line.split(": field '")[0]).name, line.split("'")[1]) for line in lines}


@pytest.mark.parametrize(
    "folder",
    sorted([*(REPO / "data/traces").iterdir(), *(REPO / "data/reference").iterdir()]),
    ids=lambda p: p.name,
)
def test_no_shipped_trace_is_named(folder: Path) -> None:
    """Every trace and reference folder shipped (ViT-B/16 where a ViT is timed): no column
    is named, by the fits' bounds, the power log's clock or another column."""
    assert slow_columns(TraceData(folder), ModelSpec()) == []


def test_a_fast_gpus_microseconds_are_named_by_the_power_logs_clock(tmp_path: Path) -> None:
    """The H200 folder with its ViT latencies and exchange times in microseconds: a fast GPU's
    microseconds read as a CPU of 43 GFLOP/s, within every bound of a fit, and nothing was
    named. The power log's clock (t_s) says each phase lasted a thousandth of what its
    repetitions add up to: each column is named but the plain copies (no phase of the log)."""
    shutil.copytree(LOOPBACK, tmp_path / "traces")
    _scaled("vit_latency.csv", tmp_path / "traces", {"latency_ms": 1000.0})
    exchange = {column: 1000.0 for column in EXCHANGE_TIMES}
    _scaled("gloo_staged_allgather.csv", tmp_path / "traces", exchange)
    named = slow_columns(TraceData(tmp_path / "traces"), ModelSpec())
    assert _columns(named) == {
        ("vit_latency.csv", "latency_ms"),
        *(("gloo_staged_allgather.csv", column) for column in EXCHANGE_TIMES),
    }
    assert "power log's vit_b" in named[0] and "x as long as the phase lasted" in named[0]


def test_the_power_logs_phase_is_said_as_the_reports_write_a_figure(tmp_path: Path) -> None:
    """``.3g`` said a gloo phase of 2,148 s on the power log's clock ``2.15e+03 s``: the
    loopback's log with its clock (t_s) 100x as long and its exchange times 100,000x."""
    shutil.copytree(LOOPBACK, tmp_path / "traces")
    _scaled("power_samples.csv", tmp_path / "traces", {"t_s": 100.0})
    _scaled("gloo_staged_allgather.csv", tmp_path / "traces", dict.fromkeys(EXCHANGE_TIMES, 1e5))
    named = slow_columns(TraceData(tmp_path / "traces"), ModelSpec())
    by_clock = [line for line in named if "lasted on the log's clock" in line]
    assert _columns(by_clock) == {("gloo_staged_allgather.csv", c) for c in ("comm_ms", "total_ms")}
    assert all(
        "as long as the phase lasted on the log's clock (2,148 s, t_s)" in line for line in by_clock
    )


@pytest.mark.parametrize("column", ["comm_ms", "h2d_ms"])
def test_a_phase_in_microseconds_beside_its_total_in_ms_is_named(
    tmp_path: Path, column: str
) -> None:
    """The shaped-link exchanges (no power log) with one phase in microseconds: a loop's
    phase took 1000x the loop's wall time (total_ms), and nothing was named (comm_ms was not
    checked, h2d_ms within a fit's bounds); it is, and only it."""
    _scaled("gloo_staged_allgather_bw.csv", tmp_path, {column: 1000.0}, NETNS)
    named = slow_columns(TraceData(tmp_path), ModelSpec())
    assert _columns(named) == {("gloo_staged_allgather_bw.csv", column)}
    assert "as long as the loop it is a phase of (total_ms)" in named[0]


@pytest.mark.parametrize("column", ["", "ttft_ms", "tpot_ms"], ids=["ms", "ttft_us", "tpot_us"])
def test_decoder_times_in_microseconds_are_named(tmp_path: Path, column: str) -> None:
    """A decoder trace (calibrate-machine's shapes) with TTFT or TPOT in microseconds: a later
    token's step 1000x the prefill, or a prefill 1000x a step per prompt token; neither was
    checked. The column is named; in ms, nothing is."""
    rows = ["layers,batch,prompt_tokens,output_tokens,rep,ttft_ms,tpot_ms"]
    for layers, batch, prompt, rep in itertools.product((2, 4), (1, 4), (16, 64), range(2)):
        ttft, tpot = 3.0 * layers * batch * prompt / 16, 10.0 * layers
        scale = {"ttft_ms": 1.0, "tpot_ms": 1.0, column: 1000.0}
        ttft, tpot = ttft * scale["ttft_ms"], tpot * scale["tpot_ms"]
        rows.append(f"{layers},{batch},{prompt},8,{rep},{ttft:g},{tpot:g}")
    (tmp_path / "decoder_latency.csv").write_text("\n".join(rows) + "\n")
    named = slow_columns(TraceData(tmp_path), ModelSpec())
    assert _columns(named) == ({("decoder_latency.csv", column)} if column else set())
