"""The results table: its rows, columns and units, and writing it (reading it:
``result_cells``; a table file: ``table_files``).

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
from typing import TYPE_CHECKING

from edgetwin.atomic import write_text_atomic
from edgetwin.scenario import RUN_MODES

if TYPE_CHECKING:
    import pandas as pd

MEASURED_MODE = "measured"  # a published or hardware table's rows
MODES = (*RUN_MODES, MEASURED_MODE)
STATUS_OK = "ok"  # a run that finished; any other status says why it did not


def read_status(cell: str | None) -> str:
    """A table's status cell as a status: an empty or blank one (or none) is ``ok``. edgetwin
    writes every row's; a hand-made or hand-edited table may leave a finished run's empty."""
    return cell if cell is not None and cell.strip() else STATUS_OK


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
    # token, throughput, and the weights and peak KV cache of the device they fill most
    # (the largest share of its own RAM; with one RAM on every device, the fullest)
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


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(ResultRow))
REQUIRED_COLUMNS: tuple[str, ...] = (*COLUMNS[:15], "status", "bytes_sent", "gflops_per_device")
# the parts a batch's latency is broken into (compute, host staging, network)
LATENCY_PARTS: tuple[str, ...] = ("compute_ms", "staging_ms", "comm_ms")
# the times of a run that succeeded; a failed run leaves them empty (NaN), its status says why
TIMING_COLUMNS = (*LATENCY_PARTS, "total_ms", "per_sample_ms")
OPTIONAL_COLUMNS: tuple[str, ...] = COLUMNS[len(REQUIRED_COLUMNS) :]
# the metrics a twin row may carry a prediction interval for, each as <metric>_lo, <metric>_hi
INTERVAL_METRICS: tuple[str, ...] = ("total_ms", "compute_ms", "staging_ms", "comm_ms", "energy_j")
assert all(f"{m}_{end}" in COLUMNS for m in INTERVAL_METRICS for end in ("lo", "hi"))


TABLE_FLOAT = ".7g"  # how the table writes a float: 7 significant digits


def format_cell(value: object) -> str:
    """A cell as the table writes it: empty for None and NaN, a float to 7 digits."""
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else format(value, TABLE_FLOAT)
    return str(value)


def as_in_table(value: float) -> float:
    """``value`` to the table's 7 significant digits: a figure worked out from its rows (a
    mean, a percentile) holds no more digits than they do (``785.6680200000001``: 785.668)."""
    return float(format(value, TABLE_FLOAT))


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
        writer.writerow([format_cell(record[c]) for c in columns])
    write_text_atomic(path, buffer.getvalue())


def table_columns(records: Sequence[Mapping[str, object]]) -> list[str]:
    """The columns a table of these rows has: the required ones, then each optional column
    that some row has a value in."""
    used = [c for c in OPTIONAL_COLUMNS if any(r[c] is not None for r in records)]
    return [*REQUIRED_COLUMNS, *used]


# pandas dtype of a ResultRow field's type; missing values are NaN (floats) or <NA>
_DTYPE_OF_TYPE = {
    "str": "string",
    "str | None": "string",
    "int": "int64",
    "int | None": "Int64",
    "float": "float64",
    "float | None": "float64",
}
DTYPES: dict[str, str] = {f.name: _DTYPE_OF_TYPE[str(f.type)] for f in fields(ResultRow)}


def results_frame(rows: Iterable[ResultRow]) -> pd.DataFrame:
    """``rows`` as a DataFrame: the columns of ``results.csv`` in its order, typed by
    ``DTYPES`` (what ``Results`` and ``PlanOutcome``'s ``to_pandas()`` return)."""
    records = [asdict(row) for row in rows]
    return typed_frame(records, {c: DTYPES[c] for c in table_columns(records)})


def typed_frame(records: Sequence[Mapping[str, object]], dtypes: Mapping[str, str]) -> pd.DataFrame:
    """``records`` as a DataFrame of the columns of ``dtypes``, in its order, each of its
    dtype (a value a record lacks, or None: missing, ``<NA>`` or NaN): every result
    object's ``to_pandas()``."""
    import pandas as pd

    data = {c: pd.Series([r.get(c) for r in records], dtype=d) for c, d in dtypes.items()}
    return pd.DataFrame(data, columns=list(dtypes))
