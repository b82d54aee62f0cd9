"""Timing tables in the results schema: any ``results.csv``, or a published table.

Required columns: strategy, devices, batch, bandwidth_mbps, total_ms. Optional (read when
present): scenario, mode, cr, segments, rep, status, compute_ms, staging_ms, comm_ms,
per_sample_ms, energy_j, bytes_sent, gflops_per_device; other columns are ignored. Metric
cells may be empty (not published, or a failed run); a filled one must be a number >= 0.
Rows are not keyed: a crowd run writes a row for each job, its configuration and rep the
same.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edgetwin.csv_rows import Row, read_rows
from edgetwin.models import registry
from edgetwin.results import MODES, read_status
from edgetwin.row_keys import RowKey, row_key
from edgetwin.schema import MAX_BATCH

REQUIRED_COLUMNS = ("strategy", "devices", "batch", "bandwidth_mbps", "total_ms")
METRIC_COLUMNS = ("compute_ms", "staging_ms", "comm_ms", "total_ms", "per_sample_ms", "energy_j")
OPTIONAL_COLUMNS = (
    "scenario",
    "mode",
    "cr",
    "segments",
    "rep",
    "status",
    "bytes_sent",
    "gflops_per_device",
    *METRIC_COLUMNS,
)


@dataclass(frozen=True)
class TimingRecord:
    """One configuration's measured or predicted times (ms per batch) and energy (J)."""

    strategy: str
    devices: int
    batch: int
    bandwidth_mbps: float
    cr: float | None
    segments: int | None
    scenario: str | None
    mode: str | None
    rep: int | None
    status: str
    compute_ms: float | None
    staging_ms: float | None
    comm_ms: float | None
    total_ms: float | None
    per_sample_ms: float | None
    energy_j: float | None
    bytes_sent: int | None
    gflops_per_device: float | None

    @property
    def key(self) -> RowKey:
        """The join key of ``edgetwin.row_keys.row_key``."""
        return row_key(
            {
                "strategy": self.strategy,
                "devices": self.devices,
                "batch": self.batch,
                "bandwidth_mbps": self.bandwidth_mbps,
                "segments": self.segments,
            }
        )


def read_timing_table(path: str | Path) -> list[TimingRecord]:
    """Rows of a results-schema table."""
    path = Path(path)
    return [_record(row) for row in read_rows(path, REQUIRED_COLUMNS, OPTIONAL_COLUMNS)]


def _record(row: Row) -> TimingRecord:
    metrics = {c: row.optional_number(c, minimum=0.0) for c in METRIC_COLUMNS}
    return TimingRecord(
        strategy=row.choice("strategy", registry.names()),
        devices=row.integer("devices", minimum=1),
        batch=row.integer("batch", minimum=1, maximum=MAX_BATCH),
        bandwidth_mbps=row.number("bandwidth_mbps", minimum=0.0),
        cr=row.optional_positive("cr"),
        segments=row.optional_integer("segments", minimum=1),
        scenario=row.optional_text("scenario"),
        mode=None if row.optional_text("mode") is None else row.choice("mode", MODES),
        rep=row.optional_integer("rep", minimum=0),
        status=read_status(row.optional_text("status")),
        compute_ms=metrics["compute_ms"],
        staging_ms=metrics["staging_ms"],
        comm_ms=metrics["comm_ms"],
        total_ms=metrics["total_ms"],
        per_sample_ms=metrics["per_sample_ms"],
        energy_j=metrics["energy_j"],
        bytes_sent=row.optional_integer("bytes_sent", minimum=0),
        gflops_per_device=row.optional_number("gflops_per_device", minimum=0.0),
    )
