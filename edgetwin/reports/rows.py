"""Results rows for the report: parsing, configuration labels, rep means."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean, stdev
from typing import TypeVar

from edgetwin.models import registry
from edgetwin.results import ResultRow

Fixed = TypeVar("Fixed")  # what a figure holds fixed: a bandwidth, a (batch, bandwidth, ...)


@dataclass(frozen=True)
class Config:
    """A strategy configuration: what a line or bar group in a figure stands for."""

    strategy: str
    devices: int
    cr: float | None
    segments: int | None


@dataclass(frozen=True)
class Point:
    """Mean over the ``ok`` reps of one configuration at one batch and bandwidth."""

    config: Config
    batch: int
    bandwidth_mbps: float
    compute_ms: float
    staging_ms: float
    comm_ms: float
    total_ms: float
    per_sample_ms: float
    energy_j: float | None
    reps: int
    total_sd_ms: float | None = None  # sample standard deviation over the reps (None: one rep)
    per_sample_sd_ms: float | None = None
    # prediction intervals (total_ms_lo/_hi, energy_j_lo/_hi), enveloped over the reps
    total_band_ms: tuple[float, float] | None = None
    energy_band_j: tuple[float, float] | None = None

    @property
    def energy_per_sample_j(self) -> float | None:
        """Energy of the batch divided by its samples."""
        return None if self.energy_j is None else self.energy_j / self.batch


def config_of(row: ResultRow) -> Config:
    """The configuration a row belongs to."""
    return Config(row.strategy, row.devices, row.cr, row.segments)


def config_order(config: Config) -> tuple[int, str, int, float, int]:
    """Sort key: strategies in registry order, then devices, CR, segments."""
    known = registry.names()
    rank = known.index(config.strategy) if config.strategy in known else len(known)
    return (rank, config.strategy, config.devices, config.cr or 0.0, config.segments or 0)


def average_reps(rows: Iterable[ResultRow]) -> list[Point]:
    """Mean of the ``ok`` reps per configuration, batch and bandwidth, sorted."""
    groups: dict[tuple[Config, int, float], list[ResultRow]] = defaultdict(list)
    for row in rows:
        if row.ok:
            groups[(config_of(row), row.batch, round(row.bandwidth_mbps, 3))].append(row)
    points = []
    for (config, batch, bandwidth_mbps), reps in groups.items():
        energies = [r.energy_j for r in reps if r.energy_j is not None]
        points.append(
            Point(
                config=config,
                batch=batch,
                bandwidth_mbps=bandwidth_mbps,
                compute_ms=fmean(r.compute_ms for r in reps),
                staging_ms=fmean(r.staging_ms for r in reps),
                comm_ms=fmean(r.comm_ms for r in reps),
                total_ms=fmean(r.total_ms for r in reps),
                per_sample_ms=fmean(r.per_sample_ms for r in reps),
                energy_j=fmean(energies) if energies else None,
                reps=len(reps),
                total_sd_ms=_spread(r.total_ms for r in reps),
                per_sample_sd_ms=_spread(r.per_sample_ms for r in reps),
                total_band_ms=_band(reps, "total_ms"),
                energy_band_j=_band(reps, "energy_j"),
            )
        )
    return sorted(points, key=lambda p: (config_order(p.config), p.batch, p.bandwidth_mbps))


def _band(reps: Sequence[ResultRow], metric: str) -> tuple[float, float] | None:
    """The widest of the reps' prediction intervals of ``metric``; None without them."""
    lows = [getattr(r, f"{metric}_lo") for r in reps]
    highs = [getattr(r, f"{metric}_hi") for r in reps]
    if any(v is None for v in (*lows, *highs)):
        return None
    return min(lows), max(highs)


def _spread(values: Iterable[float]) -> float | None:
    """Sample standard deviation of the reps; None with fewer than two."""
    sample = list(values)
    return stdev(sample) if len(sample) > 1 else None


def config_labels(configs: Iterable[Config]) -> dict[Config, str]:
    """Candidate labels (``prism cr 9.9``); devices and segments only where needed."""
    unique = sorted(set(configs), key=config_order)
    short = {c: registry.candidate_label(c.strategy, cr=c.cr) for c in unique}
    shared = Counter(short.values())
    return {
        c: registry.candidate_label(c.strategy, c.devices, c.cr, c.segments)
        if shared[short[c]] > 1
        else short[c]
        for c in unique
    }


def fullest(counts: Mapping[Fixed, int], bandwidth_mbps: Callable[[Fixed], float]) -> Fixed:
    """The slice of a figure (what it holds fixed) with the most points, on a tie the one at
    the highest bandwidth (``bandwidth_mbps``), then the first: how every run page picks
    the slice it draws."""
    return max(counts, key=lambda fixed: (counts[fixed], bandwidth_mbps(fixed)))


def most_common_bandwidth(points: Sequence[Point]) -> float | None:
    """The bandwidth with the most points (the highest on a tie: ``fullest``), or None."""
    counts = Counter(p.bandwidth_mbps for p in points)
    return fullest(counts, lambda bandwidth_mbps: bandwidth_mbps) if counts else None
