"""Traces and measured tables written or edited by hand: a row given twice, a 0 ms
repetition, a trace file under another name, a file saved in another encoding. Each was
read without a word (or with an unclear one) and gave a profile off its data."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from edgetwin.calibration.android_inputs import read_reference
from edgetwin.calibration.readers import (
    read_decoder_latency,
    read_model_costs,
    read_published_metrics,
    read_staged_allgather,
    read_staged_allgather_bw,
    read_staging_copy,
    read_vit_energy,
    read_vit_latency,
)
from edgetwin.calibration.reference_inputs import read_measured
from edgetwin.calibration.session_load import read_session_loads
from edgetwin.cli import main
from edgetwin.errors import InputError
from tests.conftest import PipedRun

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "edgetwin" / "calibration" / "specs"
DATA = REPO / "data"
LOOPBACK = DATA / "traces" / "h200-loopback-2026-11"
DECODER_CSV = (
    "layers,batch,prompt_tokens,output_tokens,rep,ttft_ms,tpot_ms\n"
    "2,1,16,8,0,20.5,3.1\n"
    "2,1,16,8,1,20.9,3.2\n"
    "2,2,16,8,0,30.5,4.1\n"
)

Reader = Callable[[Path], Any]
# a file of each reader that keys its rows: its text, and its key columns
KEYED_FILES: dict[str, tuple[Reader, Callable[[], str], tuple[str, ...]]] = {
    "vit_latency.csv": (
        read_vit_latency,
        lambda: (LOOPBACK / "vit_latency.csv").read_text(),
        ("kernel", "batch", "tokens", "rep"),
    ),
    "staging_copy.csv": (
        read_staging_copy,
        lambda: (LOOPBACK / "staging_copy.csv").read_text(),
        ("direction", "pinned", "batch", "rows", "bytes", "rep"),
    ),
    "gloo_staged_allgather.csv": (
        read_staged_allgather,
        lambda: (LOOPBACK / "gloo_staged_allgather.csv").read_text(),
        ("rank", "batch", "rows", "bytes_per_rank", "blocks", "rep"),
    ),
    "gloo_staged_allgather_bw.csv": (
        read_staged_allgather_bw,
        lambda: (
            DATA / "traces" / "h200-netns-bw-2026-11" / "gloo_staged_allgather_bw.csv"
        ).read_text(),
        ("bandwidth_mbps", "batch", "rows", "bytes_per_rank", "blocks", "rep"),
    ),
    "decoder_latency.csv": (
        read_decoder_latency,
        lambda: DECODER_CSV,
        ("layers", "batch", "prompt_tokens", "output_tokens", "rep"),
    ),
    "session_load.csv": (
        read_session_loads,
        lambda: (DATA / "traces" / "onnx-session-load-2026-12" / "session_load.csv").read_text(),
        ("cut", "stage", "rep"),
    ),
    "measurements.csv": (
        read_measured,
        lambda: (DATA / "reference" / "prism-jetson" / "measurements.csv").read_text(),
        ("strategy", "devices", "batch", "bandwidth_mbps", "segments", "rep"),
    ),
    "vit_energy.csv": (
        read_vit_energy,
        lambda: (LOOPBACK / "vit_energy.csv").read_text(),
        ("kernel", "batch"),
    ),
    "model_costs.csv": (  # its last column a top-1 share: the copy's 999 is another's
        read_model_costs,
        lambda: _without_last_column(DATA / "reference" / "prism-jetson" / "model_costs.csv"),
        ("strategy", "devices", "cr", "segments"),
    ),
}


def _without_last_column(path: Path) -> str:
    return "".join(line.rpartition(",")[0] + "\n" for line in path.read_text().splitlines())


def _repeated(text: str) -> tuple[str, int]:
    """``text`` with its first data row written again at the end, its last cell changed
    (a conflicting measurement), and the line of the copy."""
    header, first, *rest = text.strip().splitlines()
    cells = first.split(",")
    cells[-1] = "999"
    lines = [header, first, *rest, ",".join(cells)]
    return "\n".join(lines) + "\n", len(lines)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", list(KEYED_FILES))
def test_a_row_given_twice_names_both_lines_and_its_key(tmp_path: Path, name: str) -> None:
    """A repeated (group, rep) reweighted its group's mean, the held-out residuals and the
    bootstrap; a measured table's repeated configuration moved the table fit's median
    error from 1.6 % to 6.6 %; both without a word. A file of one reading a key (a
    counter's energy, a published cost) kept both, each reader of it one of them."""
    reader, text, key = KEYED_FILES[name]
    path = tmp_path / name
    changed, line = _repeated(text())
    path.write_text(changed)
    with pytest.raises(InputError) as caught:
        reader(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: line {line} repeats line 2: ")
    for column in key:
        assert f"{column} " in message
    fix = "each repetition is one row, with its own rep" if "rep" in key else "give each once"
    assert message.endswith(fix)


@pytest.mark.timeout(30)
def test_a_measured_table_may_repeat_a_configuration_by_rep(tmp_path: Path) -> None:
    """Repetitions of one configuration, numbered in ``rep``, are measurements, not
    repeats; without the column (or with one rep twice) the same rows are refused."""
    header, first, *_ = (
        (DATA / "reference" / "prism-jetson" / "measurements.csv").read_text().split()
    )
    path = tmp_path / "measurements.csv"
    path.write_text(f"{header},rep\n{first},0\n{first},1\n")
    assert len(read_measured(path)) == 2
    path.write_text(f"{header},rep\n{first},1\n{first},1.0\n")
    with pytest.raises(InputError, match=r"line 3 repeats line 2: .*rep 1\.0; each"):
        read_measured(path)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("reader", [read_reference, read_published_metrics])
def test_a_metric_given_twice_names_both_lines(tmp_path: Path, reader: Reader) -> None:
    """An Android spec's reader and the generic one of a published table: the generic one
    returned both rows."""
    shipped = DATA / "reference" / "crowdio-android" / "measurements.csv"
    header, *rows = shipped.read_text().strip().splitlines()
    path = tmp_path / "measurements.csv"
    path.write_text("\n".join([header, *rows, rows[0]]) + "\n")
    metric = rows[0].split(",")[0]
    expect = f"field 'metric': line {len(rows) + 2} repeats line 2: metric {metric}; give each once"
    with pytest.raises(InputError, match=expect):
        reader(path)


# a file of each trace reader, and the columns of its times
TIMED_FILES: dict[str, tuple[Reader, Callable[[], str], tuple[str, ...]]] = {
    name: (reader, text, columns)
    for name, (reader, text, _key) in KEYED_FILES.items()
    for columns in [
        {
            "vit_latency.csv": ("latency_ms",),
            "staging_copy.csv": ("latency_ms",),
            "gloo_staged_allgather.csv": ("d2h_ms", "comm_ms", "h2d_ms", "total_ms"),
            "gloo_staged_allgather_bw.csv": ("d2h_ms", "comm_ms", "h2d_ms", "total_ms"),
            "decoder_latency.csv": ("ttft_ms", "tpot_ms"),
        }.get(name, ())
    ]
    if columns
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("name", "column"),
    [(name, column) for name, (_, _, columns) in TIMED_FILES.items() for column in columns],
)
def test_a_single_repetition_timed_at_zero_is_refused(
    tmp_path: Path, name: str, column: str
) -> None:
    """One 0 ms repetition pulled its group's mean down and was dropped from fit.held_out
    without a word (119 of 120 residuals): no timer reads 0, so it is no measurement."""
    reader, text, _ = TIMED_FILES[name]
    header, *rows = text().strip().splitlines()
    index = header.split(",").index(column)
    cells = rows[2].split(",")
    cells[index] = "0.0"
    path = tmp_path / name
    path.write_text("\n".join([header, *rows[:2], ",".join(cells), *rows[3:]]) + "\n")
    with pytest.raises(InputError) as caught:
        reader(path)
    assert str(caught.value) == f"{path}: field '{column}': line 4: 0 must be above 0"


@pytest.mark.timeout(120)
def test_a_table_spec_fits_without_total_ms(
    tmp_path: Path, jetson_table_calibration: PipedRun
) -> None:
    """docs/traces.md listed total_ms as required of a measured table: a table spec reads
    it as optional, fits the components alone, and total_ms only adds its residuals. The
    fit with total_ms is the session's of the shipped spec (tests/test_cli_guide.py checks
    its progress lines)."""
    raw = yaml.safe_load((jetson_table_calibration.folder / "spec.yaml").read_text())
    header, *rows = [line.split(",") for line in Path(raw["reference"]).read_text().split()]
    kept = [i for i, column in enumerate(header) if column != "total_ms"]
    table = tmp_path / "measurements.csv"
    table.write_text("".join(",".join(row[i] for i in kept) + "\n" for row in [header, *rows]))
    spec = tmp_path / "without.yaml"
    spec.write_text(yaml.safe_dump({**raw, "reference": str(table)}))
    assert main(["calibrate", str(spec), "--out", str(tmp_path / "without_p.yaml")]) == 0
    profiles = {
        "with": yaml.safe_load((jetson_table_calibration.folder / "loud.yaml").read_text()),
        "without": yaml.safe_load((tmp_path / "without_p.yaml").read_text()),
    }
    with_total, without = profiles["with"], profiles["without"]
    for section in ("compute", "staging", "network", "power"):
        assert without[section] == with_total[section]
    assert "total_ms" in with_total["fit"]["median_abs_error_pct"]
    assert "total_ms" not in without["fit"]["median_abs_error_pct"]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("encoding", "expect"),
    [
        ("utf-16", "UTF-16 text (byte-order mark FF FE, a spreadsheet's 'Unicode text'); "),
        ("utf-16-be", "UTF-16 text (byte-order mark FE FF, a spreadsheet's 'Unicode text'); "),
        ("latin-1", "line 3: not UTF-8 text (byte 0xE9, 'é' in Latin-1); "),
    ],
)
def test_a_table_saved_in_another_encoding_says_how_to_save_it(
    tmp_path: Path, encoding: str, expect: str
) -> None:
    """A file not in UTF-8 was only 'not UTF-8 text': UTF-16 (Excel's 'Unicode text') and
    Latin-1 are named, with how to re-save."""
    text = "metric,mean,std,unit,notes\ncold_load,48,4,s,\ninfer,1.2,0.1,s,mesuré\n"
    data = text.encode(encoding)
    if encoding == "utf-16-be":
        data = b"\xfe\xff" + data
    path = tmp_path / "measurements.csv"
    path.write_bytes(data)
    with pytest.raises(InputError) as caught:
        read_reference(path)
    assert str(caught.value) == f"{path}: {expect}save it as UTF-8 (a spreadsheet: 'CSV UTF-8')"
