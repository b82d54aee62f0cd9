"""Trace readers: real traces and published tables, hand-made fixtures, broken copies."""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from statistics import fmean
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgetwin.calibration import readers
from edgetwin.calibration.readers import (
    EventKind,
    Phase,
    PowerSample,
    energy_by_phase,
    energy_j,
    read_chrome_trace,
    read_decoder_latency,
    read_jtop_power,
    read_model_costs,
    read_nvml_power,
    read_published_metrics,
    read_staged_allgather,
    read_staged_allgather_bw,
    read_staging_copy,
    read_timing_table,
    read_trace_folder,
    read_vit_energy,
    read_vit_latency,
    read_worker_log,
    summarize_trace,
    union_ms,
)
from edgetwin.calibration.reference_inputs import read_measured
from edgetwin.comparison import check_reference
from edgetwin.errors import InputError
from edgetwin.results import ResultRow, write_results
from edgetwin.row_keys import row_key
from edgetwin.schema import MAX_BATCH, MAX_TENSOR_BYTES

SHARED = Path(__file__).resolve().parents[2] / "shared"
FIXTURES = Path(__file__).resolve().parent / "data" / "traces"
LOOPBACK = "traces/h200-loopback-2026-11"
needs_shared = pytest.mark.skipif(
    not SHARED.is_dir(), reason=f"real traces not found: {SHARED} (shared/ beside the repo)"
)

Reader = Callable[[Path], Any]

# real CSV file -> (reader, a numeric column to corrupt, whether a negative value is invalid)
REAL_CSVS: dict[str, tuple[Reader, str, bool]] = {
    f"{LOOPBACK}/vit_latency.csv": (read_vit_latency, "latency_ms", True),
    f"{LOOPBACK}/staging_copy.csv": (read_staging_copy, "latency_ms", True),
    f"{LOOPBACK}/gloo_staged_allgather.csv": (read_staged_allgather, "comm_ms", True),
    f"{LOOPBACK}/vit_energy.csv": (read_vit_energy, "energy_mj", True),
    f"{LOOPBACK}/power_samples.csv": (read_nvml_power, "power_w", True),
    "traces/h200-netns-bw-2026-11/gloo_staged_allgather_bw.csv": (
        read_staged_allgather_bw,
        "total_ms",
        True,
    ),
    "reference/prism-jetson/measurements.csv": (read_timing_table, "total_ms", True),
    "reference/prism-jetson/model_costs.csv": (read_model_costs, "gflops_per_device", True),
    "reference/crowdio-android/measurements.csv": (read_published_metrics, "mean", False),
}
REAL_TRACES = [
    f"{LOOPBACK}/vit_b8_forward.trace.json.gz",
    f"{LOOPBACK}/gloo_staged_exchange_b8.trace.json.gz",
]
FIXTURE_CSVS: dict[str, tuple[Reader, str]] = {
    "worker_log.csv": (read_worker_log, "end_s"),
    "jtop_log.csv": (read_jtop_power, "Power TOT"),
}


def _rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(), newline="")))


def _write_rows(path: Path, rows: list[list[str]]) -> Path:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    path.write_text(buffer.getvalue())
    return path


def _rejects(reader: Reader, path: Path, *fragments: str) -> InputError:
    with pytest.raises(InputError) as caught:
        reader(path)
    message = caught.value.message
    assert path.name in message
    for fragment in fragments:
        assert fragment in message, message
    return caught.value


# --- real traces and published tables ------------------------------------------------------


@needs_shared
@pytest.mark.parametrize("name", sorted(REAL_CSVS))
def test_every_real_csv_reads(name: str) -> None:
    reader = REAL_CSVS[name][0]
    records = reader(SHARED / name)
    assert len(records) == len(_rows(SHARED / name)) - 1


@needs_shared
def test_folders_read_every_data_file_and_skip_only_the_rest() -> None:
    folders = [SHARED / "traces", SHARED / "reference"]
    for folder in (sub for top in folders for sub in sorted(top.iterdir()) if sub.is_dir()):
        found = read_trace_folder(folder)
        for skipped in found.skipped:
            assert not skipped.name.endswith((".csv", ".json.gz")), skipped
            assert skipped.name.endswith((".md", ".py", ".sh")) or skipped.name == (
                "environment.json"
            ), skipped
    loopback = read_trace_folder(SHARED / LOOPBACK)
    assert set(loopback.chrome_traces) == {Path(t).name for t in REAL_TRACES}
    assert len(loopback.vit_latency["vit_latency.csv"]) == 480
    assert len(loopback.power["power_samples.csv"]) == 3273
    prism = read_trace_folder(SHARED / "reference/prism-jetson")
    assert set(prism.timing_tables) == {"measurements.csv"}
    assert set(prism.model_costs) == {"model_costs.csv"}
    crowd = read_trace_folder(SHARED / "reference/crowdio-android")
    assert set(crowd.published_metrics) == {"measurements.csv"}


@needs_shared
def test_vit_forward_trace_kernel_time_matches_the_timed_forward() -> None:
    trace = read_chrome_trace(SHARED / REAL_TRACES[0])
    summary = summarize_trace(trace)
    timed = [
        r.latency_ms
        for r in read_vit_latency(SHARED / LOOPBACK / "vit_latency.csv")
        if r.kernel == "vit_full" and r.batch == 8
    ]
    assert summary.kernel_ms == pytest.approx(fmean(timed), rel=0.1)  # 9.01 vs 9.48 ms
    assert summary.phase(Phase.COMPUTE).device_ms == pytest.approx(summary.kernel_ms)
    assert summary.phase(Phase.STAGING).wall_ms == 0.0
    assert summary.phase(Phase.COMMUNICATION).wall_ms == 0.0
    top = summary.ops[0]
    assert top.name == "aten::_transformer_encoder_layer_fwd" and top.count == 12


@needs_shared
def test_gloo_trace_is_mostly_staging_and_communication() -> None:
    trace = read_chrome_trace(SHARED / REAL_TRACES[1])
    assert trace.backend == "gloo"
    summary = summarize_trace(trace)
    staging = summary.phase(Phase.STAGING).wall_ms
    comm = summary.phase(Phase.COMMUNICATION).wall_ms
    assert staging + comm > 0.9 * summary.span_ms
    assert summary.phase(Phase.COMPUTE).wall_ms < 0.01 * summary.span_ms
    assert comm > staging > 0
    copies = [e for e in trace.events if e.kind is EventKind.MEMCPY]
    assert len(copies) == 24 and all(e.phase is Phase.STAGING for e in copies)
    gathers = [e for e in trace.events if e.name == "gloo:all_gather"]
    assert len(gathers) == 12 and all(e.phase is Phase.COMMUNICATION for e in gathers)
    cats = [e for e in trace.events if e.name == "aten::cat"]
    assert cats and all(e.phase is Phase.STAGING for e in cats)


@needs_shared
def test_power_samples_phases_add_up_to_the_whole_log() -> None:
    samples = read_nvml_power(SHARED / LOOPBACK / "power_samples.csv")
    phases = {p.phase: p for p in energy_by_phase(samples)}
    assert set(phases) == {"idle", "vit_b1", "vit_b2", "vit_b8", "vit_b32", "gloo"}
    assert sum(p.energy_j for p in phases.values()) == pytest.approx(energy_j(samples))
    assert sum(p.duration_s for p in phases.values()) == pytest.approx(
        samples[-1].t_s - samples[0].t_s
    )
    assert phases["vit_b32"].mean_power_w > phases["vit_b1"].mean_power_w


@needs_shared
def test_published_tables_keep_empty_cells_and_join_keys() -> None:
    rows = read_timing_table(SHARED / "reference/prism-jetson/measurements.csv")
    prism = next(r for r in rows if r.strategy == "prism" and r.batch == 32)
    assert prism.segments == 10 and prism.cr == 9.9 and prism.energy_j == 11.52
    assert any(r.energy_j is None for r in rows)
    raw = next(csv.DictReader((SHARED / "reference/prism-jetson/measurements.csv").open()))
    assert rows[0].key == row_key(raw)
    metrics = {
        m.metric: m
        for m in read_published_metrics(SHARED / "reference/crowdio-android/measurements.csv")
    }
    assert metrics["cold_load"].mean == 48 and metrics["cold_load"].unit == "s"


# --- broken copies of real files ---------------------------------------------------------


def _csv_sources() -> list[tuple[Path, Reader, str, bool]]:
    sources = [(FIXTURES / n, r, c, True) for n, (r, c) in FIXTURE_CSVS.items()]
    if SHARED.is_dir():
        sources += [(SHARED / n, r, c, neg) for n, (r, c, neg) in REAL_CSVS.items()]
    return sources


CSV_SOURCES = _csv_sources()
CSV_IDS = [p.name if p.parent == FIXTURES else str(p.relative_to(SHARED)) for p, *_ in CSV_SOURCES]


@pytest.mark.parametrize(
    ("source", "reader", "column", "negative_invalid"), CSV_SOURCES, ids=CSV_IDS
)
def test_broken_csv_copies_are_rejected(
    tmp_path: Path, source: Path, reader: Reader, column: str, negative_invalid: bool
) -> None:
    text = source.read_text()
    rows = _rows(source)
    header = rows[0]
    at = header.index(column)

    cut = text.index("\n", len(text) // 2) + 4  # inside a row
    truncated = tmp_path / source.name
    truncated.write_text(text[:cut])
    _rejects(reader, truncated, f"line {text[:cut].count(chr(10)) + 1}")

    corrupt = [list(r) for r in rows]
    corrupt[2][at] = "12..5"
    _rejects(reader, _write_rows(tmp_path / source.name, corrupt), f"'{column}'", "line 3")

    if negative_invalid:
        negative = [list(r) for r in rows]
        negative[3][at] = "-1.5"
        _rejects(reader, _write_rows(tmp_path / source.name, negative), f"'{column}'", "line 4")

    dropped = [r[1:] for r in rows]
    _rejects(reader, _write_rows(tmp_path / source.name, dropped), f"'{header[0]}'", "missing")

    (tmp_path / source.name).write_text("")
    _rejects(reader, tmp_path / source.name, "empty file")
    (tmp_path / source.name).write_text(text.splitlines()[0] + "\n")
    _rejects(reader, tmp_path / source.name, "no data rows")
    _rejects(reader, tmp_path / "absent.csv", "cannot read")


def _trace_sources() -> list[Path]:
    return [FIXTURES / "tiny.trace.json"] + (
        [SHARED / t for t in REAL_TRACES] if SHARED.is_dir() else []
    )


def _trace_document(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    document: dict[str, Any] = json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)
    return document


@pytest.mark.parametrize("source", _trace_sources(), ids=lambda p: p.name)
def test_broken_trace_copies_are_rejected(tmp_path: Path, source: Path) -> None:
    document = _trace_document(source)
    text = json.dumps(document, indent=1)
    gz = tmp_path / "copy.trace.json.gz"

    compressed = gzip.compress(text.encode())
    gz.write_bytes(compressed[: len(compressed) // 2])
    _rejects(read_chrome_trace, gz, "gzip")
    flipped = bytearray(compressed)
    for i in range(len(flipped) // 2, len(flipped) // 2 + 8):
        flipped[i] ^= 0xFF
    gz.write_bytes(bytes(flipped))
    _rejects(read_chrome_trace, gz)

    cut = text[: len(text) // 2]
    gz.write_bytes(gzip.compress(cut.encode()))
    _rejects(read_chrome_trace, gz, "invalid JSON", f"line {cut.count(chr(10)) + 1}")

    events = document["traceEvents"]
    index = next(i for i, e in enumerate(events) if e.get("cat") == "cpu_op")
    for key, value, problem in (("dur", -2.0, "negative duration"), ("ts", "soon", "number")):
        broken = json.loads(text)
        broken["traceEvents"][index][key] = value
        gz.write_bytes(gzip.compress(json.dumps(broken).encode()))
        _rejects(read_chrome_trace, gz, f"traceEvents[{index}].{key}", problem)

    gz.write_bytes(gzip.compress(json.dumps({"schemaVersion": 1}).encode()))
    _rejects(read_chrome_trace, gz, "'traceEvents'")
    gz.write_bytes(text.encode())
    _rejects(read_chrome_trace, gz, "not gzip")
    gz.write_bytes(b"")
    _rejects(read_chrome_trace, gz, "empty file")


SMALL_CSVS: list[tuple[Reader, str]] = [
    (
        read_vit_latency,
        "kernel,batch,tokens,rep,latency_ms\nvit_full,1,197,0,4.029\nencoder_tokens,8,99,1,5.5\n",
    ),
    (
        read_staged_allgather,
        "rank,batch,rows,bytes_per_rank,blocks,rep,d2h_ms,comm_ms,h2d_ms,"
        "total_ms\n0,1,10,30720,12,0,0.3493,3.949,2.9814,7.2863\n",
    ),
    (
        read_nvml_power,
        "t_s,phase,power_w,sm_clock_mhz\n0.0052,idle,78.164,345\n0.0154,vit_b8,178.1,1980\n",
    ),
    (
        read_timing_table,
        "strategy,devices,batch,bandwidth_mbps,cr,segments,compute_ms,"
        "staging_ms,comm_ms,total_ms,energy_j\nprism,2,32,400,9.9,10,936.1,182.0,221.7,1339.8,\n",
    ),
    (read_published_metrics, 'metric,mean,std,unit,notes\ncold_load,48,4,s,"a, b"\n'),
    (read_worker_log, (FIXTURES / "worker_log.csv").read_text()),
    (read_jtop_power, (FIXTURES / "jtop_log.csv").read_text()),
]


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    case=st.sampled_from(range(len(SMALL_CSVS))),
    edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.binary(max_size=3)), max_size=4),
    keep=st.floats(0.05, 1.0),
)
def test_random_byte_corruption_is_an_input_error_or_a_parse(
    tmp_path: Path, case: int, edits: list[tuple[float, bytes]], keep: float
) -> None:
    reader, text = SMALL_CSVS[case]
    data = bytearray(text.encode())
    for where, replacement in edits:
        at = int(where * len(data))
        data[at : at + 1] = replacement
    path = tmp_path / "corrupt.csv"
    path.write_bytes(bytes(data[: max(1, int(keep * len(data)))]))
    try:
        reader(path)
    except InputError as exc:
        assert "corrupt.csv" in exc.message


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.binary(max_size=2)), max_size=3)
)
def test_random_corruption_of_a_gzip_trace_is_an_input_error_or_a_parse(
    tmp_path: Path, edits: list[tuple[float, bytes]]
) -> None:
    data = bytearray(gzip.compress((FIXTURES / "tiny.trace.json").read_bytes()))
    for where, replacement in edits:
        at = int(where * len(data))
        data[at : at + 1] = replacement
    path = tmp_path / "corrupt.trace.json.gz"
    path.write_bytes(bytes(data))
    try:
        read_chrome_trace(path)
    except InputError as exc:
        assert "corrupt.trace.json.gz" in exc.message


# --- hand-checkable fixtures ---------------------------------------------------------------


def test_tiny_trace_phases_are_interval_unions() -> None:
    trace = read_chrome_trace(FIXTURES / "tiny.trace.json")
    phase = {e.name: e.phase for e in trace.events}
    assert phase["aten::to"] is phase["cudaMemcpyAsync"] is Phase.STAGING
    assert phase["aten::cat"] is Phase.STAGING  # host-side concatenation
    assert phase["gloo:all_gather"] is phase["c10d::allgather_"] is Phase.COMMUNICATION
    assert [e.phase for e in trace.events if e.name == "aten::copy_"] == [
        Phase.STAGING,  # inside aten::to
        Phase.COMMUNICATION,  # inside gloo:all_gather
    ]
    assert phase["aten::linear"] is phase["gemm_kernel"] is Phase.COMPUTE
    summary = summarize_trace(trace)
    assert summary.span_ms == pytest.approx(0.66)
    assert summary.busy_ms == pytest.approx(0.59)
    assert summary.kernel_ms == pytest.approx(0.22)
    assert summary.memcpy_ms == pytest.approx(0.04)
    times = {p.phase: (p.wall_ms, p.host_ms, p.device_ms) for p in summary.phases}
    assert times[Phase.COMPUTE] == pytest.approx((0.26, 0.26, 0.22))
    assert times[Phase.STAGING] == pytest.approx((0.14, 0.14, 0.04))
    assert times[Phase.COMMUNICATION] == pytest.approx((0.19, 0.19, 0.0))
    ops = {(o.name, o.phase): o for o in summary.ops}
    linear = ops[("aten::linear", Phase.COMPUTE)]
    assert (linear.count, linear.host_ms, linear.device_ms) == pytest.approx((1, 0.1, 0.17))
    launches = ops[("cudaLaunchKernel", Phase.COMPUTE)]
    assert (launches.count, launches.host_ms, launches.device_ms) == pytest.approx((2, 0.015, 0.22))
    assert ops[("aten::to", Phase.STAGING)].device_ms == pytest.approx(0.04)


def test_union_of_nested_and_overlapping_intervals() -> None:
    assert union_ms([(0, 1000), (100, 200), (900, 1500), (2000, 2500)]) == pytest.approx(2.0)
    assert union_ms([]) == 0.0


def test_energy_of_a_hand_computable_log() -> None:
    samples = [
        PowerSample(0.0, 10.0, "a"),
        PowerSample(1.0, 10.0, "a"),
        PowerSample(2.0, 20.0, "b"),
        PowerSample(3.0, 20.0, "b"),
    ]
    assert energy_j(samples) == pytest.approx(10 + 15 + 20)
    assert energy_j(samples, 0.5, 2.5) == pytest.approx(5 + 15 + 10)
    a, b = energy_by_phase(samples)
    # the 1 s -> 2 s step is split at 1.5 s, where power is 15 W
    assert (a.phase, a.duration_s, a.energy_j) == ("a", 1.5, pytest.approx(10 + 6.25))
    assert (b.phase, b.duration_s, b.energy_j) == ("b", 1.5, pytest.approx(8.75 + 20))
    assert b.mean_power_w == pytest.approx(28.75 / 1.5)
    with pytest.raises(ValueError, match="window"):
        energy_j(samples, 0.0, 4.0)
    with pytest.raises(ValueError, match="two"):
        energy_j(samples[:1])


def test_jtop_log_is_read_in_watts_from_its_first_sample() -> None:
    samples = read_jtop_power(FIXTURES / "jtop_log.csv")
    assert [s.t_s for s in samples] == pytest.approx([0.0, 0.5, 1.0, 1.5, 2.0])
    assert [s.power_w for s in samples] == [5.0, 7.0, 7.0, 9.0, 5.0]
    assert energy_j(samples) == pytest.approx(0.5 * (6 + 7 + 8 + 7))


def test_jtop_log_variants(tmp_path: Path) -> None:
    old = _write_rows(
        tmp_path / "old.csv", [["time", "power cur"], ["10.0", "4000"], ["11", "6000"]]
    )
    assert energy_j(read_jtop_power(old)) == pytest.approx(5.0)
    none = _write_rows(tmp_path / "none.csv", [["time", "GPU"], ["10.0", "40"]])
    _rejects(read_jtop_power, none, "no power column")
    back = _write_rows(tmp_path / "back.csv", [["time", "Power TOT"], ["10", "1"], ["9", "1"]])
    _rejects(read_jtop_power, back, "line 3", "time goes back")
    bad = _write_rows(tmp_path / "bad.csv", [["time", "Power TOT"], ["noon", "1"]])
    _rejects(read_jtop_power, bad, "'time'", "line 2")


def test_worker_log_fixture_and_its_rules(tmp_path: Path) -> None:
    events = read_worker_log(FIXTURES / "worker_log.csv")
    cold = [e for e in events if e.event == "load_cold"]
    assert len(cold) == 2 and cold[0].task_id is None
    assert fmean(e.duration_s for e in cold) == pytest.approx(48.55)
    assert max(e.rss_mb or 0 for e in events) == 43.2
    rows = _rows(FIXTURES / "worker_log.csv")
    for column, value, problem in (
        ("event", "reboot", "not one of"),
        ("task_id", "", "empty cell"),
        ("end_s", "40.0", "negative duration"),
        ("battery_pct", "120", "above the maximum"),
    ):
        broken = [list(r) for r in rows]
        broken[3][rows[0].index(column)] = value  # an infer row
        path = _write_rows(tmp_path / "w.csv", broken)
        _rejects(read_worker_log, path, f"'{column}'", "line 4", problem)


def test_results_csv_round_trips_as_timing_records(tmp_path: Path) -> None:
    ok = ResultRow(
        scenario="s",
        mode="twin",
        strategy="prism",
        devices=2,
        batch=8,
        bandwidth_mbps=400.0,
        cr=9.9,
        segments=10,
        rep=0,
        compute_ms=10.0,
        staging_ms=2.0,
        comm_ms=3.0,
        total_ms=15.0,
        per_sample_ms=1.875,
        energy_j=1.5,
        bytes_sent=1024,
        gflops_per_device=17.5,
    )
    failed = ResultRow(
        scenario="s",
        mode="twin",
        strategy="voltage",
        devices=2,
        batch=8,
        bandwidth_mbps=400.0,
        cr=None,
        segments=None,
        rep=0,
        compute_ms=math.nan,
        staging_ms=math.nan,
        comm_ms=math.nan,
        total_ms=math.nan,
        per_sample_ms=math.nan,
        energy_j=None,
        status="failed: out of memory",
    )
    write_results(tmp_path / "results.csv", [ok, failed])
    first, second = read_timing_table(tmp_path / "results.csv")
    assert (first.mode, first.total_ms, first.energy_j, first.bytes_sent) == (
        "twin",
        15.0,
        1.5,
        1024,
    )
    assert first.key == ("prism", 2, 8, 400.0, "10")
    assert second.status.startswith("failed") and second.total_ms is None
    rows = _rows(tmp_path / "results.csv")
    rows[1][rows[0].index("strategy")] = "gossip"
    _rejects(read_timing_table, _write_rows(tmp_path / "results.csv", rows), "'strategy'", "line 2")


def test_a_vit_latency_kernel_is_one_the_fit_knows(tmp_path: Path) -> None:
    """A misspelt kernel was read, and the compute fit took the forward for encoder blocks
    alone (anything not ``vit_full`` is): a wrong fit without a word."""
    header = "kernel,batch,tokens,rep,latency_ms\n"
    path = tmp_path / "vit_latency.csv"
    path.write_text(header + "vit_full,1,197,0,4.029\nencoder_tokens,8,99,1,5.5\n")
    assert [r.kernel for r in read_vit_latency(path)] == ["vit_full", "encoder_tokens"]
    path.write_text(header + "vit_full,1,197,0,4.029\nvit-full,8,197,1,5.5\n")
    _rejects(read_vit_latency, path, "field 'kernel'", "line 3", "'vit-full'", "vit_full")


def test_lines_of_nothing_but_spaces_or_empty_cells_are_blank(tmp_path: Path) -> None:
    """A line of spaces (an editor's) or of empty cells (a spreadsheet's export of rows it
    once formatted) was "1 cells, the header has 5" or an empty ``kernel``: the rules say
    blank lines are skipped."""
    header = "kernel,batch,tokens,rep,latency_ms\n"
    path = tmp_path / "vit_latency.csv"
    for blank in ("   \n", ",,,,\n", " , ,,,\t\r\n"):
        path.write_text(f"{header}vit_full,1,197,0,4.029\n{blank}vit_full,1,197,1,3.9\n{blank}")
        assert [r.rep for r in read_vit_latency(path)] == [0, 1]
        path.write_text(header + blank)
        _rejects(read_vit_latency, path, "no data rows")


@pytest.mark.parametrize(
    ("header", "hint"),
    [
        ("kernel;batch;tokens;rep;latency_ms", "separated by ';'"),
        ("kernel\tbatch\ttokens\trep\tlatency_ms", "separated by tabs"),
        ("kernel,batch,tokens,rep,latency (ms)", "'latency (ms)' in the header: name it"),
        ("kernel,batch,tokens,rep,Latency [ms]", "'Latency [ms]' in the header: name it"),
        ("Kernel,batch,tokens,rep,latency_ms", "'Kernel' in the header: name it kernel"),
    ],
)
def test_a_header_a_spreadsheet_wrote_says_what_to_change(
    tmp_path: Path, header: str, hint: str
) -> None:
    """A ';'-separated export (where a comma is the decimal separator), a tab-separated one
    and a column with its unit written out were only "missing column": the fix was left to
    be spotted in the header the message lists."""
    path = tmp_path / "vit_latency.csv"
    path.write_text(f"{header}\n" + header.replace("latency", "1").replace("ms", "2") + "\n")
    _rejects(read_vit_latency, path, "missing column", hint)


UNIT_CASES: list[tuple[Reader, str, str, str]] = [
    (
        read_vit_latency,
        "kernel,batch,tokens,rep,latency_us\nvit_full,1,197,0,4029\n",
        "latency_us",
        "ms",
    ),
    (
        read_vit_latency,
        "kernel,batch,tokens,rep,Latency (s)\nvit_full,1,197,0,0.004\n",
        "Latency (s)",
        "ms",
    ),
    (read_nvml_power, "t_s,phase,power_mw\n0,idle,90000\n", "power_mw", "w"),
    (
        read_vit_energy,
        "kernel,batch,reps,wall_s,energy_j\nvit_full,1,20,0.08,24\n",
        "energy_j",
        "mj",
    ),
    (
        read_timing_table,  # compute_ms optional: compute_us was left out unsaid
        "strategy,devices,batch,bandwidth_mbps,total_ms,compute_us\nsingle,1,1,400,80.6,80600\n",
        "compute_us",
        "ms",
    ),
    (
        read_measured,  # a table spec's: its total_ms optional too
        "strategy,devices,batch,bandwidth_mbps,compute_ms,total_s\nsingle,1,1,400,80.6,0.0806\n",
        "total_s",
        "ms",
    ),
]


@pytest.mark.parametrize(("reader", "text", "column", "unit"), UNIT_CASES)
def test_a_column_in_another_unit_is_named_with_the_unit_read(
    tmp_path: Path, reader: Reader, text: str, column: str, unit: str
) -> None:
    """A column in another unit than the one read (``latency_us``) was a missing column
    where the column read is required, and left out unsaid where it is optional (a timing
    table's ``compute_us``: no compute time). The unit is told by the header alone."""
    path = tmp_path / "table.csv"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        reader(path)
    assert caught.value.field == column
    message = str(caught.value)
    assert "line 1: the column is in " in message
    assert f"is read in {unit} (edgetwin converts no unit): give the values in {unit}" in message


def test_a_column_in_another_unit_beside_the_one_read_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "vit_latency.csv"
    path.write_text("kernel,batch,tokens,rep,latency_ms,latency_us\nvit_full,1,197,0,4.029,4029\n")
    assert [r.latency_ms for r in read_vit_latency(path)] == [4.029]


def test_a_reference_table_in_another_unit_is_named_with_the_unit_read(tmp_path: Path) -> None:
    """compare's and evaluate's reader of a measured table took ``total_us`` for a
    misspelling (did you mean 'total_ms'?)."""
    path = tmp_path / "measured.csv"
    path.write_text("strategy,devices,batch,bandwidth_mbps,total_us\nsingle,1,1,400,80600\n")
    with pytest.raises(InputError) as caught:
        check_reference(path, path, None)
    assert caught.value.problem == (
        "column 'total_us' is in us, where total_ms is read in ms (edgetwin converts no "
        "unit): give the values in ms and name the column total_ms"
    )


@pytest.mark.parametrize(
    ("cell", "hint"),
    [
        ("4,5", "(a decimal comma? write '.')"),
        ("0,125", "(a decimal comma? write '.')"),  # no thousands start with 0
        ("4,029", "(a decimal comma or a thousands separator? write 4.029 or 4029)"),
        ("-1,234", "(a decimal comma or a thousands separator? write -1.234 or -1234)"),
        ("1,234,567", "(a thousands separator? write 1234567)"),
        ("1,234.5", "(a thousands separator? write 1234.5)"),
    ],
)
def test_a_comma_in_a_number_is_named(tmp_path: Path, cell: str, hint: str) -> None:
    """Three digits after one comma may be a decimal comma or a thousands separator: the
    hint said 'a decimal comma?' of 1,234 too."""
    path = tmp_path / "vit_latency.csv"
    path.write_text(f'kernel,batch,tokens,rep,latency_ms\nvit_full,1,197,0,"{cell}"\n')
    _rejects(read_vit_latency, path, f"'{cell}' is not a number {hint}")


def test_folder_recognises_files_by_header_and_lists_the_rest(tmp_path: Path) -> None:
    for name in ("worker_log.csv", "jtop_log.csv", "tiny.trace.json"):
        shutil.copy(FIXTURES / name, tmp_path / f"my_{name}")
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "sub").mkdir()
    found = read_trace_folder(tmp_path)
    assert set(found.worker_logs) == {"my_worker_log.csv"}
    assert set(found.power) == {"my_jtop_log.csv"}
    assert set(found.chrome_traces) == {"my_tiny.trace.json"}
    reasons = {s.name: s.reason for s in found.skipped}
    assert set(reasons) == {"notes.txt", "other.csv", "config.json", "sub"}
    assert "matches no known format" in reasons["other.csv"]
    (tmp_path / "vit_latency.csv").write_text("a,b\n1,2\n")  # known name, wrong header
    with pytest.raises(InputError, match=r"vit_latency\.csv: field 'kernel'"):
        read_trace_folder(tmp_path)
    with pytest.raises(InputError, match="not a folder"):
        read_trace_folder(tmp_path / "missing")


def test_folder_reads_decoder_generations_by_name_and_by_header(tmp_path: Path) -> None:
    header = "layers,batch,prompt_tokens,output_tokens,rep,ttft_ms,tpot_ms\n"
    (tmp_path / "decoder_latency.csv").write_text(header + "2,1,64,8,0,12.5,3.25\n")
    (tmp_path / "gpu_decode.csv").write_text(header + "2,4,128,8,1,30.0,4.0\n")
    found = read_trace_folder(tmp_path)
    assert set(found.decoder_latency) == {"decoder_latency.csv", "gpu_decode.csv"}
    (first,) = found.decoder_latency["decoder_latency.csv"]
    assert (first.layers, first.prompt_tokens, first.ttft_ms, first.tpot_ms) == (2, 64, 12.5, 3.25)
    assert not found.skipped
    (tmp_path / "decoder_latency.csv").write_text("layers,batch\n2,1\n")
    with pytest.raises(InputError, match=r"decoder_latency\.csv"):
        read_trace_folder(tmp_path)


BATCH_CSVS: list[tuple[Reader, str, str]] = [
    (read_vit_latency, "kernel,batch,tokens,rep,latency_ms", "vit_full,{},197,0,4.0"),
    (
        read_staging_copy,
        "direction,pinned,batch,rows,bytes,rep,latency_ms",
        "d2h,1,{},10,30720,0,0.1",
    ),
    (read_vit_energy, "kernel,batch,reps,wall_s,energy_mj", "vit_full,{},10,1.0,500"),
    (
        read_staged_allgather,
        "rank,batch,rows,bytes_per_rank,blocks,rep,d2h_ms,comm_ms,h2d_ms,total_ms",
        "0,{},10,30720,12,0,0.3,3.9,2.9,7.2",
    ),
    (
        read_staged_allgather_bw,
        "bandwidth_mbps,batch,rows,bytes_per_rank,blocks,rep,d2h_ms,comm_ms,h2d_ms,total_ms",
        "200,{},10,30720,12,0,0.4,8.9,2.7,12.0",
    ),
    (
        read_decoder_latency,
        "layers,batch,prompt_tokens,output_tokens,rep,ttft_ms,tpot_ms",
        "2,{},16,8,0,12.5,3.1",
    ),
    (read_timing_table, "strategy,devices,batch,bandwidth_mbps,total_ms", "prism,2,{},400,9.9"),
]


BYTES_CSVS: list[tuple[Reader, str, str, str]] = [
    (
        read_staging_copy,
        "direction,pinned,batch,rows,bytes,rep,latency_ms",
        "d2h,1,8,10,{},0,0.1",
        "'bytes'",
    ),
    (
        read_staged_allgather,
        "rank,batch,rows,bytes_per_rank,blocks,rep,d2h_ms,comm_ms,h2d_ms,total_ms",
        "0,8,10,{},12,0,0.3,3.9,2.9,7.2",
        "'bytes_per_rank'",
    ),
]


@pytest.mark.parametrize(("reader", "header", "row", "field"), BYTES_CSVS)
def test_a_traced_tensor_past_the_largest_is_named(
    tmp_path: Path, reader: Reader, header: str, row: str, field: str
) -> None:
    """A copied or exchanged tensor is at most MAX_TENSOR_BYTES (a staging copy of 1.7e308
    bytes was read, and calibrate fitted it and exited 0)."""
    path = tmp_path / "trace.csv"
    big = f"{row.format(MAX_TENSOR_BYTES)}\n{row.format(MAX_TENSOR_BYTES + 1)}\n"
    path.write_text(f"{header}\n{big}")
    _rejects(reader, path, field, "line 3", f"above the maximum {MAX_TENSOR_BYTES}")


@pytest.mark.parametrize(("reader", "header", "row"), BATCH_CSVS)
def test_a_trace_batch_past_the_largest_is_named(
    tmp_path: Path, reader: Reader, header: str, row: str
) -> None:
    """A trace's batch is at most MAX_BATCH, as a results row's and a scenario's (a batch
    of 10^300 overflowed a fit's prediction, or a replay's byte count)."""
    path = tmp_path / "trace.csv"
    path.write_text(f"{header}\n{row.format(MAX_BATCH)}\n{row.format(MAX_BATCH + 1)}\n")
    _rejects(reader, path, "'batch'", "line 3", f"above the maximum {MAX_BATCH}")


READERS = sorted(name for name in readers.__all__ if name.startswith("read_"))  # all exported


@pytest.mark.parametrize("name", READERS)
def test_every_reader_takes_a_path_as_text(name: str, tmp_path: Path) -> None:
    """A str, as ``edgetwin.run`` takes: it stopped every reader with an AttributeError
    ('str' object has no attribute 'exists'), a traceback; a missing file is now named."""
    missing = tmp_path / "missing.csv"
    with pytest.raises(InputError) as caught:
        getattr(readers, name)(str(missing))
    assert "missing.csv" in caught.value.message


def test_a_reader_reads_the_same_from_text_as_from_a_path(tmp_path: Path) -> None:
    header, row = BATCH_CSVS[0][1:]
    path = _write_rows(tmp_path / "vit_latency.csv", [header.split(","), row.format(2).split(",")])
    assert read_vit_latency(str(path)) == read_vit_latency(path)
