"""The smallest fleet question: per batch, the p95 latency over fleet size x bandwidth and
the smallest split fleet, and the least bandwidth, that meet the target (a configuration
with a failed repetition has no p95: ``failed`` says why); the lowest p95 swept (how far a
target nothing meets is out of reach); and whether one device (the baseline) meets it
already, which makes it the smallest fleet."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from edgetwin.models import registry
from edgetwin.models.registry import CandidateKey
from edgetwin.plan.answer_stats import Cell, p95_ms
from edgetwin.plan.questions import SmallestFleet
from edgetwin.results import ResultRow


def smallest_fleet(
    kind: SmallestFleet,
    grouped: dict[CandidateKey, dict[Cell, list[ResultRow]]],
    batches: Sequence[int],
    bandwidths: Sequence[float],
) -> dict[str, Any]:
    """Per batch: p95 over devices x bandwidth and the smallest fleet / bandwidth meeting it."""
    target = kind.target_p95_ms
    one = registry.baseline().name  # the one device the fleets are weighed against
    by_devices = {
        k.devices: cells
        for k, cells in grouped.items()
        if k.devices is not None and k.strategy != one
    }
    devices = sorted(by_devices)
    baseline = next((cells for k, cells in grouped.items() if k.strategy == one), None)
    per_batch = []
    for batch in batches:
        grid = [[p95_ms(by_devices[d][(batch, bw)]) for bw in bandwidths] for d in devices]
        meets = [
            (d, bw)
            for d, row in zip(devices, grid, strict=True)
            for bw, value in zip(bandwidths, row, strict=True)
            if meets_target(value, target)
        ]
        split = _point(min(meets, key=lambda m: (m[0], m[1]), default=None))
        link = min(meets, key=lambda m: (m[1], m[0]), default=None)
        # a table swept before the question ran one device has no baseline
        alone = None
        if baseline is not None:
            pooled = [row for bw in bandwidths for row in baseline[(batch, bw)]]
            alone = _one_device(one, pooled, target)
        entry: dict[str, Any] = {
            "batch": batch,
            "p95_ms": grid,
            "failed": [[_failed(by_devices[d][(batch, bw)]) for bw in bandwidths] for d in devices],
            "min_bandwidth_mbps_by_devices": [
                min((bw for dd, bw in meets if dd == d), default=None) for d in devices
            ],
            # one device that meets the target is the smallest fleet (it needs no link)
            "smallest_fleet": _point((1, None)) if alone and alone["meets_target"] else split,
            "smallest_split": split,
            "smallest_bandwidth": _point(link),
            "lowest_p95": _lowest(devices, bandwidths, grid),
        }
        if alone is not None:
            entry["baseline"] = alone
        per_batch.append(entry)
    strategy = kind.strategy
    cr = strategy.cr[0] if strategy.cr else None
    seg = strategy.segments[0] if strategy.segments else None
    return {
        "target_p95_ms": target,
        "strategy": registry.candidate_label(strategy.name, None, cr, seg),
        "devices": devices,
        "bandwidths_mbps": list(bandwidths),
        "per_batch": per_batch,
    }


def _one_device(name: str, rows: Sequence[ResultRow], target_p95_ms: float) -> dict[str, Any]:
    """The baseline's p95 over all its rows, every swept bandwidth's repetitions (bandwidth
    does not touch one device: its rows differ by their noise draws only), whether it meets
    the target, and why not where a repetition failed (``out of memory on jetson-0: ...``)."""
    p95 = p95_ms(rows)
    return {
        "strategy": name,
        "p95_ms": p95,
        "meets_target": meets_target(p95, target_p95_ms),
        "failed": _failed(rows),
    }


def _failed(rows: Sequence[ResultRow]) -> str | None:
    """The status of the first repetition that failed (``out of memory on jetson-0: ...``): the
    configuration has no p95 and meets nothing; None where every repetition ran."""
    return next((row.status for row in rows if not row.ok), None)


def meets_target(p95_ms: float | None, target_p95_ms: float) -> bool:
    """Whether a configuration's p95 meets the target (None: a repetition failed)."""
    return p95_ms is not None and p95_ms <= target_p95_ms


def _lowest(
    devices: Sequence[int], bandwidths: Sequence[float], grid: Sequence[Sequence[float | None]]
) -> dict[str, float] | None:
    """The configuration with the lowest p95 (the fewest devices, then the least bandwidth,
    among equals) and that p95; None where every configuration had a failed repetition."""
    ran = [
        (value, d, bw)
        for d, row in zip(devices, grid, strict=True)
        for bw, value in zip(bandwidths, row, strict=True)
        if value is not None
    ]
    if not ran:
        return None
    value, d, bw = min(ran)
    return {"devices": d, "bandwidth_mbps": bw, "p95_ms": value}


def _point(point: tuple[int, float | None] | None) -> dict[str, float | None] | None:
    return None if point is None else {"devices": point[0], "bandwidth_mbps": point[1]}
