"""The performance map: latency and energy of every candidate over (batch, bandwidth).

Profiled once (in the twin, or read from a results table in the results
schema: an emulator run or a hardware table), stored as JSON on the terminal
device, read at run time by the selection policies. Between grid points a
candidate's latency and energy are interpolated linearly in log2(batch) and
in bandwidth; outside the grid the query is clamped to the nearest edge (the
edge value is held constant). Schema: docs/adaptive.md.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, ValidationError, model_validator

from edgetwin.atomic import write_text_atomic
from edgetwin.errors import InputError
from edgetwin.results import ResultRow, read_results
from edgetwin.scenario import Scenario
from edgetwin.schema import PositiveFloat, PositiveInt, Strict, validation_error
from edgetwin.sim.runner import build_fleet, run_scenario

SELECTABLE = ("single", "voltage", "prism", "tensor_parallel")
Cell = Annotated[float, Field(ge=0)] | None  # None: failed run or not measured


class Candidate(Strict):
    """One deployment the policy can pick, with its profiled grid ([batch][bandwidth])."""

    strategy: Literal["single", "voltage", "prism", "tensor_parallel"]
    devices: PositiveInt
    cr: PositiveFloat | None = None
    segments: PositiveInt | None = None
    gflops_per_device: Annotated[float, Field(ge=0)] | None = None  # per sample
    bytes_sent: tuple[Annotated[float, Field(ge=0)], ...]  # per batch, over all devices
    latency_ms: tuple[tuple[Cell, ...], ...]
    energy_j: tuple[tuple[Cell, ...], ...]

    @property
    def label(self) -> str:
        """Short name: ``single``, ``voltage x2``, ``prism cr 9.9 x2``."""
        if self.strategy == "single":
            return "single"
        cr = "" if self.cr is None else f" cr {self.cr:g}"
        return f"{self.strategy}{cr} x{self.devices}"


class PerformanceMap(Strict):
    """Candidates profiled on one grid of batch x bandwidth (JSON on the terminal)."""

    format: Literal["edgetwin-performance-map"] = "edgetwin-performance-map"
    version: Literal[1] = 1
    scenario: str
    source: str
    batches: tuple[PositiveInt, ...] = Field(min_length=1)
    bandwidths_mbps: tuple[PositiveFloat, ...] = Field(min_length=1)
    candidates: tuple[Candidate, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _check_grid(self) -> PerformanceMap:
        for name, axis in (("batches", self.batches), ("bandwidths_mbps", self.bandwidths_mbps)):
            if list(axis) != sorted(set(axis)):
                raise ValueError(f"{name} must be strictly increasing")
        shape = (len(self.batches), len(self.bandwidths_mbps))
        for i, c in enumerate(self.candidates):
            if len(c.bytes_sent) != shape[0]:
                raise ValueError(f"candidates.{i}.bytes_sent needs {shape[0]} values (batches)")
            for key in ("latency_ms", "energy_j"):
                grid = getattr(c, key)
                if len(grid) != shape[0] or any(len(row) != shape[1] for row in grid):
                    raise ValueError(f"candidates.{i}.{key} must be {shape[0]} x {shape[1]}")
        if not any(c.strategy == "single" for c in self.candidates):
            raise ValueError("the map needs a 'single' candidate")
        if len({c.label for c in self.candidates}) != len(self.candidates):
            raise ValueError("candidates must be unique (strategy, cr, devices)")
        return self

    @property
    def single(self) -> Candidate:
        return next(c for c in self.candidates if c.strategy == "single")

    def estimate(self, candidate: Candidate, batch: float, bandwidth_mbps: float) -> Estimate:
        """Latency and energy of ``candidate`` at a condition (interpolated, clamped)."""
        return Estimate(
            latency_ms=self._interpolate(candidate.latency_ms, batch, bandwidth_mbps),
            energy_j=self._interpolate(candidate.energy_j, batch, bandwidth_mbps),
        )

    def bytes_sent(self, candidate: Candidate, batch: float) -> float:
        """Bytes a batch moves over all devices (interpolated in log2 batch, clamped)."""
        log_batches = np.log2(self.batches)
        return float(np.interp(math.log2(batch), log_batches, candidate.bytes_sent))

    def _interpolate(
        self, grid: tuple[tuple[float | None, ...], ...], batch: float, bandwidth_mbps: float
    ) -> float:
        values = np.array([[math.nan if v is None else v for v in row] for row in grid])
        along_bw = [float(np.interp(bandwidth_mbps, self.bandwidths_mbps, row)) for row in values]
        return float(np.interp(math.log2(batch), np.log2(self.batches), along_bw))


class Estimate(Strict):
    """Latency and energy of one batch; NaN where the map has no value (infeasible)."""

    latency_ms: float
    energy_j: float


def profile_twin(scenario: Scenario, scenario_path: Path | None) -> PerformanceMap:
    """Run the scenario's sweeps in the twin; its configurations become the map."""
    rows = [o.row for o in run_scenario(scenario, build_fleet(scenario, scenario_path))]
    return map_from_rows(rows, scenario.name, "twin", scenario_path)


def map_from_table(path: Path) -> PerformanceMap:
    """A map from a results table (twin, emulator, or measured rows in the results schema)."""
    try:
        rows = read_results(path)
    except (KeyError, ValueError) as exc:
        raise InputError(path, None, f"not a results table: {exc}") from None
    return map_from_rows(rows, path.stem, f"table {path.name}", path)


def map_from_rows(
    rows: Iterable[ResultRow], scenario: str, source: str, path: Path | None
) -> PerformanceMap:
    """Group rows by candidate and grid cell; repetitions are averaged, failed runs are null."""
    cells: dict[CandidateKey, dict[tuple[int, float], list[ResultRow]]] = defaultdict(dict)
    for row in rows:
        if row.strategy in SELECTABLE:
            key = (row.strategy, row.devices, row.cr, row.segments)
            cells[key].setdefault((row.batch, row.bandwidth_mbps), []).append(row)
    batches = sorted({b for grid in cells.values() for b, _ in grid})
    bandwidths = sorted({bw for grid in cells.values() for _, bw in grid})
    candidates = [_candidate(key, grid, batches, bandwidths, path) for key, grid in cells.items()]
    raw = {
        "scenario": scenario,
        "source": source,
        "batches": batches,
        "bandwidths_mbps": bandwidths,
        "candidates": sorted(candidates, key=lambda c: (c["devices"], c["strategy"] != "single")),
    }
    return validate_map(raw, path)


CandidateKey = tuple[str, int, float | None, int | None]


def _candidate(
    key: CandidateKey,
    grid: dict[tuple[int, float], list[ResultRow]],
    batches: Sequence[int],
    bandwidths: Sequence[float],
    path: Path | None,
) -> dict[str, object]:
    strategy, devices, cr, segments = key
    for batch, bw in itertools.product(batches, bandwidths):
        if (batch, bw) not in grid:
            field = f"{strategy} devices={devices}" + ("" if cr is None else f" cr={cr:g}")
            raise InputError(path, field, f"no row at batch {batch}, bandwidth {bw:g} Mbps")
    first = grid[(batches[0], bandwidths[0])][0]
    return {
        "strategy": strategy,
        "devices": devices,
        "cr": cr,
        "segments": segments,
        "gflops_per_device": first.gflops_per_device,
        "bytes_sent": [_mean([r.bytes_sent for r in grid[(b, bandwidths[0])]]) for b in batches],
        "latency_ms": [[_ok_mean(grid[(b, bw)], "total_ms") for bw in bandwidths] for b in batches],
        "energy_j": [[_ok_mean(grid[(b, bw)], "energy_j") for bw in bandwidths] for b in batches],
    }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _ok_mean(rows: Sequence[ResultRow], column: str) -> float | None:
    """Mean over successful repetitions; None when none succeeded or the value is missing."""
    values = [getattr(r, column) for r in rows if r.status == "ok"]
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    return _mean(finite) if finite and len(finite) == len(values) else None


def validate_map(raw: object, path: Path | None) -> PerformanceMap:
    """Validate a raw map; the first error becomes one InputError naming its field."""
    try:
        return PerformanceMap.model_validate(raw)
    except ValidationError as exc:
        raise validation_error(exc, path or "<performance map>") from None


def read_map(path: Path) -> PerformanceMap:
    """A performance map from its JSON file."""
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(path, None, "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, None, f"cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(path, None, f"malformed JSON at line {exc.lineno}: {exc.msg}") from None
    return validate_map(raw, path)


def write_map(path: Path, perf_map: PerformanceMap) -> None:
    """Write the map as JSON (atomically)."""
    write_text_atomic(path, perf_map.model_dump_json(indent=1) + "\n")
