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
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from edgetwin.atomic import write_text_atomic

STRATEGIES = (
    "single",
    "voltage",
    "prism",
    "tensor_parallel",
    "crowdio_streaming",
    "crowdio_barrier",
)
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


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(ResultRow))
REQUIRED_COLUMNS: tuple[str, ...] = COLUMNS[:15]


def _format(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else format(value, ".7g")
    return str(value)


def write_results(path: Path, rows: Iterable[ResultRow]) -> None:
    """Write rows atomically, floats to 7 significant digits (stable across runs)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([_format(v) for v in asdict(row).values()])
    write_text_atomic(path, buffer.getvalue())


def read_table(path: Path) -> list[dict[str, str]]:
    """Read any CSV in (a superset of) the results schema as dicts of strings."""
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def parse_number(text: str | None) -> float | None:
    """A CSV cell as a float, or None when empty."""
    if text is None or text.strip() == "":
        return None
    return float(text)


def row_key(row: Mapping[str, object]) -> tuple[str, int, int, float, str]:
    """Join key of a configuration: strategy, devices, batch, bandwidth, segments."""
    segments = row.get("segments")
    return (
        str(row["strategy"]),
        int(float(str(row["devices"]))),
        int(float(str(row["batch"]))),
        round(float(str(row["bandwidth_mbps"])), 3),
        "" if segments in (None, "") else str(int(float(str(segments)))),
    )
