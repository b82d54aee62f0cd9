"""Read every known trace file of a folder (not its sub-folders).

Recognition: ``*.json`` / ``*.json.gz`` files with ``trace`` in the name are profiler
traces; a ``.csv`` with a known name (``vit_latency.csv``, ``decoder_latency.csv``,
``results.csv``, ...) is
read as that kind, any other ``.csv`` as the kind whose required columns its header has
(the one requiring most columns wins). A recognised file that is malformed is an
InputError; files of no known kind are returned as skipped, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgetwin import worker_log
from edgetwin.calibration.readers import (
    android,
    decoder_latency,
    gpu_bench,
    jtop,
    power,
    reference,
    staged_exchange,
    timing_table,
)
from edgetwin.calibration.readers.android import WorkerEvent
from edgetwin.calibration.readers.chrome_trace import ChromeTrace, read_chrome_trace
from edgetwin.calibration.readers.decoder_latency import DecoderLatency
from edgetwin.calibration.readers.gpu_bench import CounterEnergy, StagingCopy, VitLatency
from edgetwin.calibration.readers.power import PowerSample
from edgetwin.calibration.readers.reference import ModelCost, PublishedMetric
from edgetwin.calibration.readers.staged_exchange import StagedExchange
from edgetwin.calibration.readers.timing_table import TimingRecord
from edgetwin.csv_rows import read_header
from edgetwin.errors import InputError
from edgetwin.table_files import RESULTS_CSV


@dataclass(frozen=True)
class SkippedFile:
    """A file of the folder that was not read, and why."""

    name: str
    reason: str


@dataclass(frozen=True)
class TraceFolder:
    """What a folder holds, by kind; each mapping is keyed by file name."""

    path: Path
    chrome_traces: dict[str, ChromeTrace]
    vit_latency: dict[str, list[VitLatency]]
    staging_copy: dict[str, list[StagingCopy]]
    decoder_latency: dict[str, list[DecoderLatency]]
    staged_exchange: dict[str, list[StagedExchange]]
    counter_energy: dict[str, list[CounterEnergy]]
    power: dict[str, list[PowerSample]]
    timing_tables: dict[str, list[TimingRecord]]
    published_metrics: dict[str, list[PublishedMetric]]
    model_costs: dict[str, list[ModelCost]]
    worker_logs: dict[str, list[WorkerEvent]]
    skipped: list[SkippedFile]


@dataclass(frozen=True)
class _CsvKind:
    field: str  # of TraceFolder
    names: tuple[str, ...]  # file names always read as this kind
    columns: tuple[str, ...]  # required header columns
    reader: Callable[[Path], list[Any]]


CSV_KINDS = (
    _CsvKind(
        "vit_latency",
        (gpu_bench.VIT_LATENCY_FILE,),
        gpu_bench.VIT_LATENCY_COLUMNS,
        gpu_bench.read_vit_latency,
    ),
    _CsvKind(
        "staging_copy",
        (gpu_bench.STAGING_COPY_FILE,),
        gpu_bench.STAGING_COPY_COLUMNS,
        gpu_bench.read_staging_copy,
    ),
    _CsvKind(
        "decoder_latency",
        (decoder_latency.DECODER_LATENCY_FILE,),
        decoder_latency.DECODER_LATENCY_COLUMNS,
        decoder_latency.read_decoder_latency,
    ),
    _CsvKind(
        "counter_energy",
        (gpu_bench.VIT_ENERGY_FILE,),
        gpu_bench.VIT_ENERGY_COLUMNS,
        gpu_bench.read_vit_energy,
    ),
    _CsvKind(
        "staged_exchange",
        (staged_exchange.LOOPBACK_FILE,),
        staged_exchange.LOOPBACK_COLUMNS,
        staged_exchange.read_staged_allgather,
    ),
    _CsvKind(
        "staged_exchange",
        (staged_exchange.BANDWIDTH_FILE,),
        staged_exchange.BANDWIDTH_COLUMNS,
        staged_exchange.read_staged_allgather_bw,
    ),
    _CsvKind("power", (power.NVML_POWER_FILE,), power.NVML_COLUMNS, power.read_nvml_power),
    _CsvKind(
        "timing_tables",
        (RESULTS_CSV,),
        timing_table.REQUIRED_COLUMNS,
        timing_table.read_timing_table,
    ),
    _CsvKind(
        "model_costs",
        (reference.MODEL_COSTS_FILE,),
        reference.MODEL_COST_COLUMNS,
        reference.read_model_costs,
    ),
    _CsvKind("published_metrics", (), reference.METRIC_COLUMNS, reference.read_published_metrics),
    _CsvKind("worker_logs", (), worker_log.COLUMNS, android.read_worker_log),
)
FIELDS = tuple(dict.fromkeys(["chrome_traces", *(kind.field for kind in CSV_KINDS)]))


def read_trace_folder(path: str | Path) -> TraceFolder:
    """Read the known files of ``path``; list the others as skipped."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(path, None, "not a folder")
    found: dict[str, dict[str, Any]] = {field: {} for field in FIELDS}
    skipped = []
    for file in sorted(path.iterdir()):
        name = file.name
        if name.startswith("."):
            skipped.append(SkippedFile(name, "hidden file"))
        elif file.is_dir():
            skipped.append(SkippedFile(name, "a folder (sub-folders are not searched)"))
        elif name.endswith((".json", ".json.gz")):
            if "trace" in name:
                found["chrome_traces"][name] = read_chrome_trace(file)
            else:
                skipped.append(SkippedFile(name, "JSON without 'trace' in its name"))
        elif name.endswith(".csv"):
            kind, reason = _csv_kind(file)
            if kind is None:
                skipped.append(SkippedFile(name, reason))
            else:
                found[kind.field][name] = kind.reader(file)
        else:
            skipped.append(SkippedFile(name, f"not a trace format ({file.suffix or 'no suffix'})"))
    return TraceFolder(path=path, skipped=skipped, **found)


def power_logs(path: Path) -> list[tuple[Path, Callable[[Path], list[PowerSample]]]]:
    """The power logs of folder ``path`` (NVML by name, jtop by header), each with its reader."""
    logs = []
    for file in sorted(path.glob("*.csv")):
        kind = _csv_kind(file)[0]
        if kind is not None and kind.field == "power":
            logs.append((file, kind.reader))
    return logs


def _csv_kind(file: Path) -> tuple[_CsvKind | None, str]:
    """The kind a CSV is read as, by name then by header; else None and the reason."""
    for kind in CSV_KINDS:
        if file.name in kind.names:
            return kind, ""
    try:
        header = read_header(file)
    except InputError as exc:
        return None, f"unreadable header: {exc.problem}"
    power_column = jtop.jtop_power_column(header)
    if jtop.TIME_COLUMN in header and power_column is not None:
        return _CsvKind("power", (), (), jtop.read_jtop_power), ""
    matches = [kind for kind in CSV_KINDS if set(kind.columns) <= set(header)]
    if not matches:
        return None, "CSV header matches no known format"
    return max(matches, key=lambda kind: len(kind.columns)), ""
