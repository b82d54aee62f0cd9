"""Published reference tables that are not timing tables.

- CROWDio Android ``measurements.csv``: metric, mean, std, unit, notes (one aggregate
  per row, mean +- std over runs; std and notes may be empty); each metric once.
- Prism Jetson ``model_costs.csv``: strategy, devices, gflops_per_device,
  compute_speedup_pct (required); cr, segments, comm_reduction_pct, cifar10_top1_pct
  (optional, may be empty); each configuration (strategy, devices, cr, segments) once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edgetwin.csv_rows import Row, check_once, read_rows
from edgetwin.models import registry

MODEL_COSTS_FILE = "model_costs.csv"
METRIC_COLUMNS = ("metric", "mean", "std", "unit")
MODEL_COST_COLUMNS = ("strategy", "devices", "gflops_per_device", "compute_speedup_pct")
MODEL_COST_OPTIONAL = ("cr", "segments", "comm_reduction_pct", "cifar10_top1_pct")
MODEL_COST_KEY = ("strategy", "devices", "cr", "segments")  # one configuration: a row of each


@dataclass(frozen=True)
class PublishedMetric:
    """One published aggregate, e.g. ``cold_load`` = 48 +- 4 s."""

    metric: str
    mean: float
    std: float | None
    unit: str
    notes: str | None


@dataclass(frozen=True)
class ModelCost:
    """Per-device GFLOPs of one forward for a strategy, and what it saves."""

    strategy: str
    devices: int
    cr: float | None
    segments: int | None
    gflops_per_device: float
    compute_speedup_pct: float | None
    comm_reduction_pct: float | None
    cifar10_top1_pct: float | None


def read_metric_rows(path: str | Path) -> list[Row]:
    """The rows of a metric/mean/std/unit table, each metric once (a second row of it had
    replaced the first, or stood beside it, unsaid)."""
    path = Path(path)
    rows = read_rows(path, METRIC_COLUMNS, optional=("notes",))
    check_once(rows, ("metric",), [row.text("metric") for row in rows])
    return rows


def read_published_metrics(path: str | Path) -> list[PublishedMetric]:
    """Rows of a metric/mean/std/unit table (``read_metric_rows``)."""
    path = Path(path)
    return [
        PublishedMetric(
            metric=row.text("metric"),
            mean=row.number("mean"),
            std=row.optional_number("std", minimum=0.0),
            unit=row.text("unit"),
            notes=row.optional_text("notes"),
        )
        for row in read_metric_rows(path)
    ]


def read_model_costs(path: str | Path) -> list[ModelCost]:
    """Rows of a ``model_costs.csv``, each configuration (strategy, devices, cr, segments)
    once: a published table gives one figure of each."""
    path = Path(path)
    rows = read_rows(path, MODEL_COST_COLUMNS, MODEL_COST_OPTIONAL)
    costs = [
        ModelCost(
            strategy=row.choice("strategy", registry.names()),
            devices=row.integer("devices", minimum=1),
            cr=row.optional_positive("cr"),
            segments=row.optional_integer("segments", minimum=1),
            gflops_per_device=row.number("gflops_per_device", minimum=0.0),
            compute_speedup_pct=row.optional_number("compute_speedup_pct"),
            comm_reduction_pct=row.optional_number("comm_reduction_pct"),
            cifar10_top1_pct=row.optional_number("cifar10_top1_pct", 0.0, 100.0),
        )
        for row in rows
    ]
    check_once(rows, MODEL_COST_KEY, [(c.strategy, c.devices, c.cr, c.segments) for c in costs])
    return costs
