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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from edgetwin.atomic import write_text_atomic
from edgetwin.errors import InputError
from edgetwin.provenance import note_read

MODES = ("twin", "local", "emu", "measured")


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
    status: str = "ok"
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
    # real code paths (mode local / emu)
    max_abs_diff_vs_single: float | None = None
    top1_agreement_vs_single: float | None = None
    tokens_match_single: float | None = None  # decoders: share of tokens equal to single's
    # emulator runs: the link check's error furthest from zero at this row's bandwidth
    # (wire rate vs set rate, %); outside edgetwin.links.TOLERANCE_PCT the link fell short
    link_error_pct: float | None = None
    # crowd runs (CROWDio pipeline): ``batch`` is the job's inputs too (times are per job);
    # model loads along the job's critical input are ``load_ms`` (``staging_ms`` is 0)
    inputs: int | None = None
    load_ms: float | None = None
    stages: int | None = None
    scheduler: str | None = None
    peak_rss_mb: float | None = None
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


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(ResultRow))
_FIELD_TYPES = {f.name: str(f.type) for f in fields(ResultRow)}
REQUIRED_COLUMNS: tuple[str, ...] = (*COLUMNS[:15], "status", "bytes_sent", "gflops_per_device")
OPTIONAL_COLUMNS: tuple[str, ...] = COLUMNS[len(REQUIRED_COLUMNS) :]
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


def read_table(path: Path) -> list[dict[str, str]]:
    """Read any CSV in (a superset of) the results schema as dicts of strings; a file that
    cannot be read is an ``InputError`` naming it."""
    note_read(path)
    try:
        with path.open(newline="") as handle:
            return list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(path, None, f"cannot read: {exc}") from None


def parse_number(text: str | None) -> float | None:
    """A CSV cell as a float, or None when empty."""
    if text is None or text.strip() == "":
        return None
    return float(text)


def read_results(path: Path) -> list[ResultRow]:
    """A ``results.csv`` as rows; empty timing cells (failed runs) read as NaN. A missing
    column or a cell that is not of its column's type is an ``InputError`` naming the line."""
    rows = []
    for line, record in enumerate(read_table(path), start=2):
        try:
            rows.append(parse_result(record))
        except KeyError as exc:
            raise InputError(path, f"line {line}", f"no column {exc}") from None
        except (TypeError, ValueError) as exc:
            raise InputError(path, f"line {line}", f"not a results table row: {exc}") from None
    return rows


def parse_result(record: Mapping[str, str]) -> ResultRow:
    """One record of ``results.csv`` (as read by ``read_table``) as a ResultRow.

    A crowd row of a file written before ``load_ms`` had its loads in ``staging_ms``."""
    if record.get("inputs") and "load_ms" not in record:
        record = {**record, "load_ms": record.get("staging_ms") or "", "staging_ms": "0"}
    segments = parse_number(record.get("segments"))
    return ResultRow(
        scenario=record["scenario"],
        mode=record["mode"],
        strategy=record["strategy"],
        devices=int(float(record["devices"])),
        batch=int(float(record["batch"])),
        bandwidth_mbps=float(record["bandwidth_mbps"]),
        cr=parse_number(record.get("cr")),
        segments=None if segments is None else int(segments),
        rep=int(float(record["rep"])),
        compute_ms=_number_or_nan(record.get("compute_ms")),
        staging_ms=_number_or_nan(record.get("staging_ms")),
        comm_ms=_number_or_nan(record.get("comm_ms")),
        total_ms=_number_or_nan(record.get("total_ms")),
        per_sample_ms=_number_or_nan(record.get("per_sample_ms")),
        energy_j=parse_number(record.get("energy_j")),
        status=record.get("status") or "ok",
        bytes_sent=int(parse_number(record.get("bytes_sent")) or 0),
        gflops_per_device=parse_number(record.get("gflops_per_device")),
        **{c: _optional(c, record.get(c)) for c in OPTIONAL_COLUMNS},
    )


def _optional(column: str, text: str | None) -> Any:
    """An optional column's cell, typed as the ResultRow field says."""
    if text is None or text == "":
        return None
    kind = _FIELD_TYPES[column]
    if "str" in kind:
        return text
    value = float(text)
    return int(value) if kind.startswith("int") else value


def _number_or_nan(text: str | None) -> float:
    value = parse_number(text)
    return math.nan if value is None else value


EncoderKey = tuple[str, int, int, float, str]
RowKey = EncoderKey | tuple[str, int, int, float, str, int, int]


def row_key(row: Mapping[str, object]) -> RowKey:
    """Join key of a configuration: strategy, devices, batch, bandwidth, segments, and a
    decoder's prompt and output tokens (rows without them, encoders', keep the first five)."""
    segments = row.get("segments")
    key: EncoderKey = (
        str(row["strategy"]),
        int(float(str(row["devices"]))),
        int(float(str(row["batch"]))),
        round(float(str(row["bandwidth_mbps"])), 3),
        "" if segments in (None, "") else str(int(float(str(segments)))),
    )
    prompt = row.get("prompt_tokens")
    if prompt in (None, ""):
        return key
    return (*key, int(float(str(prompt))), int(float(str(row.get("output_tokens")))))
