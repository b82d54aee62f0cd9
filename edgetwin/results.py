"""The results table: columns, units, writing and reading.

One row per configuration run. The same columns describe a published table,
a hardware trace, an emulator run and a twin run, so any two can be joined.
Times are per batch (one forward of the whole batch through the whole
model); ``energy_j`` is the energy of the whole batch over every device that
took part.
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from functools import cache, partial
from pathlib import Path
from typing import Any, TypeGuard

from edgetwin.atomic import write_text_atomic
from edgetwin.crowd_spec import MAX_PHONES
from edgetwin.errors import InputError, shown, shown_text
from edgetwin.file_kinds import not_a_run_folder
from edgetwin.models import registry
from edgetwin.provenance import note_read
from edgetwin.scenario import RUN_MODES
from edgetwin.schema import MAX_BATCH, first_repeated

MEASURED_MODE = "measured"  # a published or hardware table's rows
MODES = (*RUN_MODES, MEASURED_MODE)
STATUS_OK = "ok"  # a run that finished; any other status says why it did not
# the twin's reasons a run fails, each status one of them and where: "out of memory on
# jetson-0", "device lost: jetson-1: battery empty", "incomplete: 0 of 4 inputs done; <why>"
OUT_OF_MEMORY = "out of memory"
DEVICE_LOST = "device lost"
INCOMPLETE = "incomplete"
SHOWN_REASONS = 3  # the commonest reasons a failure summary names before "..."


@dataclass(frozen=True)
class ResultRow:
    """One configuration run; units are in the field names."""

    scenario: str
    mode: str
    strategy: str
    devices: int
    batch: int
    bandwidth_mbps: float
    cr: float | None
    segments: int | None
    rep: int
    compute_ms: float
    staging_ms: float
    comm_ms: float
    total_ms: float
    per_sample_ms: float
    energy_j: float | None
    status: str = STATUS_OK
    bytes_sent: int = 0
    gflops_per_device: float | None = None
    # sequence length, when a profile varies it (performance maps)
    tokens: int | None = None
    # decoder LLMs (docs/llm.md): the workload, time to first token, mean time per later
    # token, throughput, and the largest per-device weights and peak KV cache
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    tokens_per_s: float | None = None
    energy_per_token_j: float | None = None
    weights_mb: float | None = None
    kv_cache_mb: float | None = None
    # a layer split (pipeline): each device's layers in rank order, "8+16" (configuration.py)
    layer_split: str | None = None
    # real code paths (mode local / emu)
    max_abs_diff_vs_single: float | None = None
    top1_agreement_vs_single: float | None = None
    # decoders: the share of output tokens equal to single's before the first that differs
    # (mean over sequences); the later ones follow other prefixes (docs/llm.md)
    prefix_agreement_vs_single: float | None = None
    # emulator runs: the link check's error furthest from zero at this row's bandwidth
    # (wire rate vs set rate, %); outside edgetwin.links.TOLERANCE_PCT the link fell short
    link_error_pct: float | None = None
    # crowd runs (CROWDio pipeline): ``batch`` is the job's inputs too (times are per job);
    # model loads along the job's critical input are ``load_ms`` (``staging_ms`` is 0)
    inputs: int | None = None
    load_ms: float | None = None
    stages: int | None = None
    scheduler: str | None = None
    # what the job's sessions and their work add to a device's memory at their peak: the
    # twin's session RAM, a real worker's RSS above it before any session (docs/crowd.md)
    peak_session_mb: float | None = None
    battery_mah: float | None = None
    cold_loads: int | None = None
    warm_loads: int | None = None
    evictions: int | None = None
    bytes_moved: int | None = None
    tasks_redispatched: int | None = None
    # prediction intervals (scenario ``intervals: L``, docs/calibration.md "Prediction
    # intervals"): the band of each of INTERVAL_METRICS at level L, and the metrics whose
    # band says "not known" (no held-out residuals: the wide band of NOT_KNOWN_FACTOR)
    total_ms_lo: float | None = None
    total_ms_hi: float | None = None
    compute_ms_lo: float | None = None
    compute_ms_hi: float | None = None
    staging_ms_lo: float | None = None
    staging_ms_hi: float | None = None
    comm_ms_lo: float | None = None
    comm_ms_hi: float | None = None
    energy_j_lo: float | None = None
    energy_j_hi: float | None = None
    interval_not_known: str | None = None

    @property
    def ok(self) -> bool:
        """The run finished (its status is ``ok``)."""
        return self.status == STATUS_OK


def failure_reason(status: str) -> str:
    """What a failed status is counted under, without where: ``out of memory``, ``device
    lost (battery empty)``, a crowd job's why without its counts (``no phone connected``);
    a status of another shape (a measured table's) as it is."""
    if status.startswith(OUT_OF_MEMORY):
        return OUT_OF_MEMORY
    if status.startswith(f"{DEVICE_LOST}: "):
        return f"{DEVICE_LOST} ({status.rsplit(': ', 1)[-1]})"
    if status.startswith(f"{INCOMPLETE}: "):
        return status.split("; ", 1)[-1].split(" (", 1)[0]
    return status


def failed_summary(rows: Iterable[ResultRow]) -> str:
    """``0 failed``, ``3 failed: out of memory 2, device lost (battery empty) 1``: the rows
    that failed and their commonest reasons (``failure_reason``), then "..." for more."""
    reasons = Counter(failure_reason(row.status) for row in rows if not row.ok)
    if not reasons:
        return "0 failed"
    common = ", ".join(f"{why} {count}" for why, count in reasons.most_common(SHOWN_REASONS))
    more = ", ..." if len(reasons) > SHOWN_REASONS else ""
    return f"{reasons.total()} failed: {common}{more}"


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(ResultRow))
_FIELD_TYPES = {f.name: str(f.type) for f in fields(ResultRow)}
REQUIRED_COLUMNS: tuple[str, ...] = (*COLUMNS[:15], "status", "bytes_sent", "gflops_per_device")
_KEYED_COLUMNS = ("scenario", "mode", "strategy", "devices", "batch", "bandwidth_mbps", "rep")
# the parts a batch's latency is broken into (compute, host staging, network)
LATENCY_PARTS: tuple[str, ...] = ("compute_ms", "staging_ms", "comm_ms")
# the times of a run that succeeded; a failed run leaves them empty (NaN), its status says why
TIMING_COLUMNS = (*LATENCY_PARTS, "total_ms", "per_sample_ms")
_EMPTY: dict[str, Any] = {
    **dict.fromkeys(TIMING_COLUMNS, math.nan),
    "status": STATUS_OK,
    "bytes_sent": 0,
}
OPTIONAL_COLUMNS: tuple[str, ...] = COLUMNS[len(REQUIRED_COLUMNS) :]
# numbers that are counts or sizes of something that runs (more than 0); every other number
# is a time, an energy, a size or a count of what happened (0 or more), but for one
_POSITIVE_COLUMNS = frozenset(
    {"devices", "batch", "bandwidth_mbps", "cr", "segments", "tokens", "inputs", "stages"}
    | {"prompt_tokens", "output_tokens"}
)
_SIGNED_COLUMNS = frozenset(("link_error_pct",))  # the measured link's rate off its target
# a count past which no run goes (a scenario refuses it); a crowd row's devices are its
# phones, whose bound is above a split model's ranks' (scenario.MAX_DEVICES)
_MAXIMA = {"batch": MAX_BATCH, "devices": MAX_PHONES}
# the metrics a twin row may carry a prediction interval for, each as <metric>_lo, <metric>_hi
INTERVAL_METRICS: tuple[str, ...] = ("total_ms", "compute_ms", "staging_ms", "comm_ms", "energy_j")
assert all(f"{m}_{end}" in COLUMNS for m in INTERVAL_METRICS for end in ("lo", "hi"))


def _format(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else format(value, ".7g")
    return str(value)


def write_results(path: Path, rows: Iterable[ResultRow]) -> None:
    """Write rows atomically, floats to 7 significant digits (stable across runs).

    Optional columns (real-run and crowd columns) appear only when some row has a value.
    """
    records = [asdict(row) for row in rows]
    columns = table_columns(records)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for record in records:
        writer.writerow([_format(record[c]) for c in columns])
    write_text_atomic(path, buffer.getvalue())


def table_columns(records: Sequence[Mapping[str, object]]) -> list[str]:
    """The columns a table of these rows has: the required ones, then each optional column
    that some row has a value in."""
    used = [c for c in OPTIONAL_COLUMNS if any(r[c] is not None for r in records)]
    return [*REQUIRED_COLUMNS, *used]


RESULTS_CSV, RESULTS_PARQUET = "results.csv", "results.parquet"
# what reading a table file may raise besides an InputError (pyarrow's errors are ValueErrors)
TABLE_READ_ERRORS = (OSError, UnicodeDecodeError, csv.Error, ValueError)


def results_file(folder: Path) -> Path:
    """A run folder's results table: ``results.csv``, else ``results.parquet`` (what ``run
    --format parquet`` writes alone); neither is an ``InputError`` naming the CSV, and a
    file given for the folder one saying what to give instead."""
    try:
        is_file = folder.is_file()
    except OSError:  # a name too long, say: said below
        is_file = False
    if is_file:
        raise InputError(folder, None, not_a_run_folder(folder, (RESULTS_CSV, RESULTS_PARQUET)))
    for name in (RESULTS_CSV, RESULTS_PARQUET):
        try:
            if (folder / name).is_file():
                return folder / name
        except OSError as exc:  # a name too long, say
            raise InputError(folder, None, f"cannot be read: {exc.strerror}") from None
    csv_path = folder / RESULTS_CSV
    if csv_path.exists():  # a folder, a FIFO, a link to a device
        raise InputError(csv_path, None, f"not a regular file (nor is {RESULTS_PARQUET} one)")
    raise InputError(csv_path, None, f"file not found (nor {RESULTS_PARQUET})")


def table_records(
    path: Path, check_header: Callable[[list[str]], None] = lambda _header: None
) -> tuple[list[str], list[dict[str, str]]]:
    """The header and rows of a CSV, or of a ``.parquet`` file with each cell as its
    ``str`` (a float at full precision) and a missing value empty, as in a CSV. Raises one
    of ``TABLE_READ_ERRORS`` where the file cannot be read, a row's cells are not as many
    as the header's columns among them. ``check_header`` sees the header before any row
    is read (a file that is not the table a caller reads is said as such first)."""
    if not path.is_file():  # a folder; a FIFO or /dev/zero would be read forever
        raise ValueError("not a regular file" if path.exists() else "file not found")
    data = path.read_bytes()  # once: parsed and hashed for the provenance
    note_read(path, data)
    if path.suffix == ".parquet":
        import pandas as pd

        frame = pd.read_parquet(io.BytesIO(data))
        header = [str(c) for c in frame.columns]
        check_header(header)
        records = frame.to_dict("records")
        return header, [{c: _parquet_cell(r[c]) for c in header} for r in records]
    reader = csv.reader(io.StringIO(data.decode("utf-8-sig"), newline=""))  # a BOM is no column
    header = next(reader, [])
    twice = first_repeated(header)
    if twice is not None:  # the last of the two was read, unsaid
        raise ValueError(f"line 1: column {twice[1]!r} appears twice in the header")
    check_header(header)
    rows = []
    for cells in reader:
        if not cells:  # a blank line
            continue
        if len(cells) != len(header):  # a row cut short, or run on (was read as empty)
            raise ValueError(
                f"line {reader.line_num}: {len(cells)} cells, the header has {len(header)}"
            )
        rows.append(dict(zip(header, cells, strict=True)))
    return header, rows


def _parquet_cell(value: object) -> str:
    import pandas as pd

    return "" if value is None or pd.isna(value) else str(value)


def read_table(path: Path, required: Sequence[str] = ()) -> list[dict[str, str]]:
    """Read a CSV (or a ``.parquet`` file: ``table_records``) as dicts of strings; a file
    that cannot be read, or whose header lacks a ``required`` column (an empty file has no
    header), is an ``InputError`` naming it."""

    def has_required(header: list[str]) -> None:
        missing = [c for c in required if c not in header]
        if missing:
            found = f"header: {', '.join(header)}" if header else "the file has no header"
            raise InputError(path, missing[0], f"no such column ({shown_text(found)})")

    try:
        _, rows = table_records(path, has_required)
    except TABLE_READ_ERRORS as exc:
        raise InputError(path, None, f"cannot read: {exc}") from None
    return rows


def parse_number(text: str | None) -> float | None:
    """A CSV cell as a finite float, or None when empty; ``ValueError`` if it is not one."""
    if text is None or text.strip() == "":
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{shown(text)} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{shown(text)} is not a finite number")
    return value


def required_number(text: str | None) -> float:
    """A CSV cell as a finite float; ``ValueError`` if it is empty or not one."""
    value = parse_number(text)
    if value is None:
        raise ValueError("empty cell")
    return value


def _whole(text: str) -> int:
    """A cell holding a whole number (``4`` or ``4.0``)."""
    value = required_number(text)
    if not value.is_integer():
        raise ValueError(f"{shown(text)} is not a whole number")
    return int(value)


def _mode(text: str) -> str:
    if text not in MODES:
        raise ValueError(f"{shown(text)} is not one of {', '.join(MODES)}")
    return text


def _strategy_name(text: str) -> str:
    return registry.strategy(text).name  # ValueError naming the known ones


class CellError(ValueError):
    """A cell of a results table that is missing or not of its column's type."""

    def __init__(self, column: str, problem: str) -> None:
        self.column = column
        self.problem = problem
        super().__init__(f"column {column!r}: {problem}")


def _cell(record: Mapping[str, str | None], column: str, parse: Callable[[Any], Any]) -> Any:
    """``parse`` of ``record[column]``; a missing column or a bad cell is a CellError."""
    if column not in record:
        raise CellError(column, "no such column")
    try:
        return parse(record[column])
    except (TypeError, ValueError, OverflowError) as exc:
        raise CellError(column, str(exc)) from None


def read_results(path: Path) -> list[ResultRow]:
    """A ``results.csv`` (or a ``results.parquet``) as rows; empty timing cells (failed
    runs) read as NaN. A missing column, a cell that is not of its column's type, or an
    empty timing on a row whose status is ``ok`` is an ``InputError`` naming the column
    and the line (the row, counted from 0, of a parquet file)."""
    rows = []
    for index, record in enumerate(read_table(path, (*_KEYED_COLUMNS, "total_ms"))):
        try:
            rows.append(_timed_if_ok(parse_result(record), record))
        except CellError as exc:
            problem = f"{record_place(path, index)}: {exc.problem}"
            raise InputError(path, exc.column, problem) from None
    return rows


def check_row(row: ResultRow) -> None:
    """``row`` as ``write_results`` writes it must read back as ``read_results`` reads it
    (each cell of its column's type and range, the times of a row whose status is ``ok``);
    else a ``CellError`` naming the column. For rows that no run made just now (a plan's
    journal)."""
    record = {column: _format(value) for column, value in asdict(row).items()}
    _timed_if_ok(parse_result(record), record)


def _timed_if_ok(row: ResultRow, record: Mapping[str, str]) -> ResultRow:
    """``row``, unless its status is ``ok`` and a timing column it has is empty: a
    ``CellError`` (a run that failed says why in its status)."""
    if row.ok:
        for column in TIMING_COLUMNS:
            if column in record and math.isnan(getattr(row, column)):
                raise CellError(column, "empty on a row whose status is ok")
    return row


def record_place(path: Path, index: int) -> str:
    """Where the record ``index`` (from 0) of a table file is: a CSV's line (its header is
    line 1), a parquet file's row (from 0)."""
    return f"row {index}" if path.suffix == ".parquet" else f"line {index + 2}"


def parse_result(record: Mapping[str, str]) -> ResultRow:
    """One record of ``results.csv`` (as read by ``read_table``) as a ResultRow; a
    missing column or a bad cell is a ``CellError`` naming the column.

    A crowd row of a file written before ``load_ms`` had its loads in ``staging_ms``; a
    decoder row written before ``prefix_agreement_vs_single``, ``tokens_match_single``
    (``_prefix_agreement``); a crowd row written before ``peak_session_mb``, ``peak_rss_mb``
    (``_peak_session``)."""
    if record.get("inputs") and "load_ms" not in record:
        record = {**record, "load_ms": record.get("staging_ms") or "", "staging_ms": "0"}
    if _OLD_PEAK in record and "peak_session_mb" not in record:
        record = {**record, "peak_session_mb": _peak_session(record)}
    if _OLD_AGREEMENT in record and "prefix_agreement_vs_single" not in record:
        record = {**record, "prefix_agreement_vs_single": _prefix_agreement(record)}
    optional = {c: record.get(c) for c in COLUMNS if c not in _KEYED_COLUMNS}
    _check_workload(record)
    return ResultRow(
        **{c: _cell(record, c, _cell_parser(c)) for c in _KEYED_COLUMNS},
        **{c: _cell(optional, c, _cell_parser(c)) for c in optional},
    )


_WORKLOAD_COLUMNS = ("prompt_tokens", "output_tokens")  # a decoder row's: both or neither


def _check_workload(row: Mapping[str, object]) -> None:
    """A ``CellError`` naming the one of a decoder's workload columns that is empty while
    the other is given (the row's key needs both: it was a traceback, or an encoder's)."""
    given = [c for c in _WORKLOAD_COLUMNS if row.get(c) not in (None, "")]
    if len(given) == 1:
        (empty,) = (c for c in _WORKLOAD_COLUMNS if c not in given)
        raise CellError(empty, f"empty while {given[0]} is given: a decoder's row has both")


_OLD_AGREEMENT = "tokens_match_single"  # every token compared, those after a divergence too


def _prefix_agreement(record: Mapping[str, str]) -> str:
    """An older file's ``tokens_match_single`` as ``prefix_agreement_vs_single``: 1 (every
    token equal) is the same on both; any other share counted tokens after the first
    difference, which says nothing of where it was: empty."""
    try:
        return "1" if float(record[_OLD_AGREEMENT]) == 1.0 else ""
    except ValueError:
        return ""


_OLD_PEAK = "peak_rss_mb"  # the twin's session RAM; a real worker's whole process RSS


def _peak_session(record: Mapping[str, str]) -> str:
    """An older file's ``peak_rss_mb`` as ``peak_session_mb``: a twin row's meant the same
    (its sessions' RAM); a real row's was its worker process's RSS, interpreter and
    libraries included, which says nothing of its sessions': empty."""
    return record[_OLD_PEAK] if record.get("mode") == "twin" else ""


def check_cells(record: Mapping[str, str | None], columns: Iterable[str]) -> None:
    """Each of ``columns`` that ``record`` has must read as ``parse_result`` reads it (a
    known strategy, a count or time in its range, a finite number); else a ``CellError``
    naming the column. For tables with only some of the columns (a published one)."""
    for column in columns:
        if column in record:
            _cell(record, column, _cell_parser(column))


@cache
def _cell_parser(column: str) -> Callable[[Any], Any]:
    """How a cell of ``column`` is read: the keyed columns are required, the others typed
    as their ResultRow field (``_typed``); made once per column, not per cell."""
    keyed: dict[str, Callable[[Any], Any]] = {
        "scenario": str,
        "mode": _mode,
        "strategy": _strategy_name,
        "bandwidth_mbps": partial(_in_range, "bandwidth_mbps", required_number),
    }
    if column in keyed:
        return keyed[column]
    if column in _KEYED_COLUMNS:  # devices, batch, rep
        return partial(_in_range, column, _whole)
    return partial(_typed, column)


def _typed(column: str, text: str | None) -> Any:
    """A cell of a column that may be empty, typed as the ResultRow field says: an empty
    timing is NaN (a failed run), an empty status ``ok``, empty bytes 0, else None."""
    if text is None or text.strip() == "":
        return _EMPTY.get(column)
    kind = _FIELD_TYPES[column]
    if "str" in kind:
        return text
    return _in_range(column, _whole if kind.startswith("int") else required_number, text)


def _in_range(column: str, parse: Callable[[str], float], text: str) -> Any:
    """``parse(text)``, which must be more than 0 for a count or size of what runs and 0
    or more for other numbers (a link's error may be either sign), and at most a count's
    maximum (``_MAXIMA``); else ``ValueError``."""
    value = parse(text)
    if column in _POSITIVE_COLUMNS and value <= 0:
        raise ValueError(f"{shown(text)}: must be more than 0")
    if column in _MAXIMA and value > _MAXIMA[column]:
        raise ValueError(f"{shown(text)}: must be at most {_MAXIMA[column]}")
    if column not in _SIGNED_COLUMNS and value < 0:
        raise ValueError(f"{shown(text)}: must be 0 or more")
    return value


EncoderKey = tuple[str, int, int, float, str]
CrowdKey = tuple[str, int, int, float, str, str]  # ..., the scheduler
DecoderKey = tuple[str, int, int, float, str, int, int]  # ..., prompt and output tokens
RowKey = EncoderKey | CrowdKey | DecoderKey


def row_key(row: Mapping[str, object]) -> RowKey:
    """Join key of a configuration: strategy, devices, batch, bandwidth, segments, and a
    crowd row's scheduler or a decoder's prompt and output tokens (rows with neither,
    encoders', keep the first five)."""
    _check_workload(row)
    segments = row.get("segments")
    key: EncoderKey = (
        str(row["strategy"]),
        _whole(str(row["devices"])),
        _whole(str(row["batch"])),
        round(required_number(str(row["bandwidth_mbps"])), 3),
        "" if segments in (None, "") else str(_whole(str(segments))),
    )
    scheduler = row.get("scheduler")
    if scheduler not in (None, ""):
        return (*key, str(scheduler))
    prompt = row.get("prompt_tokens")
    if prompt in (None, ""):
        return key
    return (*key, _whole(str(prompt)), _whole(str(row.get("output_tokens"))))


def is_crowd_key(key: RowKey) -> TypeGuard[CrowdKey]:
    """A crowd row's key (phones, inputs, a scheduler)."""
    return len(key) == 6
