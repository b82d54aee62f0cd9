"""The performance map: latency and energy of every candidate over (tokens, batch, bandwidth).

Profiled once (in the twin, or read from a results table in the results
schema: an emulator run or a hardware table), stored as JSON on the terminal
device, read at run time by the selection policies. Between grid points a
candidate's latency and energy are interpolated linearly in bandwidth, in
log2(batch) and in the sequence length (tokens); outside the grid batch and
bandwidth are clamped to the nearest edge, tokens extrapolated linearly from
the two nearest profiled lengths (``along_tokens``). Schema:
docs/adaptive.md.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Literal, NamedTuple

import numpy as np
from pydantic import Field, ValidationError, field_validator, model_validator

from edgetwin.atomic import write_text_atomic
from edgetwin.errors import InputError
from edgetwin.models import registry
from edgetwin.models.layout import segments_for_cr
from edgetwin.results import ResultRow, read_results
from edgetwin.schema import PositiveFloat, PositiveInt, Strict, validation_error

VERSION: Literal[2] = 2
Cell = Annotated[float, Field(ge=0)] | None  # None: failed run or not measured
Grid = tuple[tuple[tuple[Cell, ...], ...], ...]  # [tokens][batch][bandwidth]


class Candidate(Strict):
    """One deployment the policy can pick, with its profiled grid ([tokens][batch][bandwidth]).

    A Prism candidate is identified by its CR; its segments follow the sequence length
    (L = round(tokens / (CR x devices)), as the twin and the real code resolve a CR).
    """

    strategy: str
    devices: PositiveInt
    cr: PositiveFloat | None = None
    # per sample at the first length (the heuristic uses only its ratio to single's)
    gflops_per_device: Annotated[float, Field(ge=0)] | None = None
    bytes_sent: tuple[tuple[Annotated[float, Field(ge=0)], ...], ...]  # [tokens][batch]
    latency_ms: Grid
    energy_j: Grid

    @field_validator("strategy")
    @classmethod
    def _selectable(cls, name: str) -> str:
        if not registry.strategy(name).selectable:
            raise ValueError(f"{name} is not a strategy the adaptive policy may pick")
        return name

    def segments(self, tokens: float) -> int | None:
        """Segments L of a candidate with a CR at a sequence length (None otherwise)."""
        if self.cr is None:
            return None
        return segments_for_cr(round(tokens), self.devices, self.cr)

    @property
    def one_device(self) -> bool:
        return registry.strategy(self.strategy).one_device

    @property
    def label(self) -> str:
        """``single``, ``voltage x2``, ``prism cr 9.9 x2`` (``registry.candidate_label``)."""
        return registry.candidate_label(self.strategy, self.devices, self.cr)


class PerformanceMap(Strict):
    """Candidates profiled on one grid of tokens x batch x bandwidth (JSON on the terminal)."""

    format: Literal["edgetwin-performance-map"] = "edgetwin-performance-map"
    version: Literal[2] = VERSION
    scenario: str
    source: str
    tokens: tuple[PositiveInt, ...] = Field(min_length=1)
    batches: tuple[PositiveInt, ...] = Field(min_length=1)
    bandwidths_mbps: tuple[PositiveFloat, ...] = Field(min_length=1)
    candidates: tuple[Candidate, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _check_grid(self) -> PerformanceMap:
        axes = {
            "tokens": self.tokens,
            "batches": self.batches,
            "bandwidths_mbps": self.bandwidths_mbps,
        }
        for name, axis in axes.items():
            if list(axis) != sorted(set(axis)):
                raise ValueError(f"{name} must be strictly increasing")
        shape = tuple(len(axis) for axis in axes.values())
        for i, c in enumerate(self.candidates):
            for key, dims in (
                ("bytes_sent", shape[:2]),
                ("latency_ms", shape),
                ("energy_j", shape),
            ):
                if not _has_shape(getattr(c, key), dims):
                    size = " x ".join(map(str, dims))
                    raise ValueError(f"candidates.{i}.{key} must be {size} (tokens x batch ...)")
        if not any(c.one_device for c in self.candidates):
            raise ValueError(f"the map needs a '{registry.baseline().name}' candidate")
        if len({c.label for c in self.candidates}) != len(self.candidates):
            raise ValueError("candidates must be unique (strategy, cr, devices)")
        return self

    @property
    def single(self) -> Candidate:
        return next(c for c in self.candidates if c.one_device)

    @property
    def devices(self) -> tuple[int, ...]:
        """The device counts the map profiled (1: single), increasing."""
        return tuple(sorted({c.devices for c in self.candidates}))

    def resolve_tokens(self, tokens: float | None) -> float:
        """The sequence length of a query; None is allowed when the map has only one."""
        if tokens is not None:
            return tokens
        if len(self.tokens) > 1:
            raise ValueError(f"the map spans tokens {list(self.tokens)}; give the query's tokens")
        return self.tokens[0]

    def estimate(
        self, candidate: Candidate, batch: float, bandwidth_mbps: float, tokens: float
    ) -> Estimate:
        """Latency and energy of ``candidate`` at a condition (interpolated; see the module)."""
        return Estimate(
            latency_ms=self._interpolate(candidate.latency_ms, tokens, batch, bandwidth_mbps),
            energy_j=self._interpolate(candidate.energy_j, tokens, batch, bandwidth_mbps),
        )

    def bytes_sent(self, candidate: Candidate, batch: float, tokens: float) -> float:
        """Bytes a batch moves over all devices (interpolated like latency)."""
        log_batches = np.log2(self.batches)
        per_tokens = [
            float(np.interp(math.log2(batch), log_batches, b)) for b in candidate.bytes_sent
        ]
        return along_tokens(tokens, self.tokens, per_tokens)

    def _interpolate(self, grid: Grid, tokens: float, batch: float, bandwidth_mbps: float) -> float:
        per_tokens = []
        for plane in grid:
            values = np.array([[math.nan if v is None else v for v in row] for row in plane])
            along_bw = [float(np.interp(bandwidth_mbps, self.bandwidths_mbps, r)) for r in values]
            per_tokens.append(float(np.interp(math.log2(batch), np.log2(self.batches), along_bw)))
        return along_tokens(tokens, self.tokens, per_tokens)


def along_tokens(tokens: float, grid: Sequence[float], values: Sequence[float]) -> float:
    """Linear in tokens between profiled lengths; outside, extrapolated from the nearest two
    (latency and bytes grow about linearly with the sequence length), never below 0."""
    if tokens in grid:
        return values[list(grid).index(tokens)]
    if len(grid) == 1:
        return values[0]
    k = int(np.clip(np.searchsorted(grid, tokens), 1, len(grid) - 1))
    slope = (values[k] - values[k - 1]) / (grid[k] - grid[k - 1])
    value = values[k - 1] + slope * (tokens - grid[k - 1])
    return 0.0 if value < 0 else value


def _has_shape(values: object, dims: Sequence[int]) -> bool:
    """Whether nested tuples ``values`` have exactly the lengths ``dims``."""
    if not dims:
        return True
    return (
        isinstance(values, tuple)
        and len(values) == dims[0]
        and all(_has_shape(v, dims[1:]) for v in values)
    )


class Estimate(Strict):
    """Latency and energy of one batch; NaN where the map has no value (infeasible)."""

    latency_ms: float
    energy_j: float


def map_from_table(path: Path, default_tokens: int) -> PerformanceMap:
    """A map from a results table (twin, emulator, or measured rows in the results schema);
    rows without a ``tokens`` value ran at ``default_tokens``."""
    try:
        rows = read_results(path)
    except (KeyError, ValueError) as exc:
        raise InputError(path, None, f"not a results table: {exc}") from None
    return map_from_rows(rows, path.stem, f"table {path.name}", path, default_tokens)


CandidateKey = tuple[str, int, float | None]


class Axes(NamedTuple):
    """The profiled values of each axis, increasing."""

    tokens: list[int]
    batches: list[int]
    bandwidths_mbps: list[float]


GridCell = tuple[int, int, float]  # tokens, batch, bandwidth_mbps


def map_from_rows(
    rows: Iterable[ResultRow],
    scenario: str,
    source: str,
    path: Path | None,
    default_tokens: int,
) -> PerformanceMap:
    """Group rows by candidate and grid cell; repetitions are averaged, failed runs are null."""
    cells: dict[CandidateKey, dict[GridCell, list[ResultRow]]] = defaultdict(dict)
    for row in rows:
        if row.strategy in registry.names() and registry.strategy(row.strategy).selectable:
            tokens = default_tokens if row.tokens is None else row.tokens
            cell = (tokens, row.batch, row.bandwidth_mbps)
            cells[(row.strategy, row.devices, row.cr)].setdefault(cell, []).append(row)
    axes = Axes(
        sorted({t for grid in cells.values() for t, _, _ in grid}),
        sorted({b for grid in cells.values() for _, b, _ in grid}),
        sorted({bw for grid in cells.values() for _, _, bw in grid}),
    )
    by_devices = sorted(cells.items(), key=lambda item: item[0][1])  # single first
    candidates = [_candidate(key, grid, axes, path) for key, grid in by_devices]
    raw = {
        "scenario": scenario,
        "source": source,
        "tokens": axes.tokens,
        "batches": axes.batches,
        "bandwidths_mbps": axes.bandwidths_mbps,
        "candidates": candidates,
    }
    return validate_map(raw, path)


def _candidate(
    key: CandidateKey,
    grid: dict[GridCell, list[ResultRow]],
    axes: Axes,
    path: Path | None,
) -> dict[str, object]:
    strategy, devices, cr = key
    tokens, batches, bandwidths = axes
    for cell in itertools.product(tokens, batches, bandwidths):
        if cell not in grid:
            field = f"{strategy} devices={devices}" + ("" if cr is None else f" cr={cr:g}")
            where = f"tokens {cell[0]:g}, batch {cell[1]:g}, bandwidth {cell[2]:g} Mbps"
            raise InputError(path, field, f"no row at {where}")

    def over_grid(column: str) -> list[list[list[float | None]]]:
        return [
            [[_ok_mean(grid[(t, b, bw)], column) for bw in bandwidths] for b in batches]
            for t in tokens
        ]

    first = grid[(tokens[0], batches[0], bandwidths[0])][0]
    return {
        "strategy": strategy,
        "devices": devices,
        "cr": cr,
        "gflops_per_device": first.gflops_per_device,
        "bytes_sent": [
            [_mean([r.bytes_sent for r in grid[(t, b, bandwidths[0])]]) for b in batches]
            for t in tokens
        ],
        "latency_ms": over_grid("total_ms"),
        "energy_j": over_grid("energy_j"),
    }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _ok_mean(rows: Sequence[ResultRow], column: str) -> float | None:
    """Mean over successful repetitions; None when none succeeded or the value is missing."""
    values = [getattr(r, column) for r in rows if r.status == "ok"]
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    return _mean(finite) if finite and len(finite) == len(values) else None


def validate_map(raw: object, path: Path | None) -> PerformanceMap:
    """Validate a raw map; the first error becomes one InputError naming its field.

    A version-1 map (batch x bandwidth, no tokens axis) is refused with a clear error."""
    if isinstance(raw, dict) and raw.get("version", VERSION) != VERSION:
        found = raw.get("version")
        raise InputError(
            path,
            "version",
            f"version {found!r} maps are not read; this edgetwin reads version {VERSION} "
            "(a tokens axis): profile the map again (edgetwin evaluate)",
        )
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
