"""The crossover question: per batch and fleet size, the bandwidth from which the best
variant of a strategy beats one device (linear in 1 / bandwidth between swept
bandwidths: ``models/bandwidth_axis.py``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from edgetwin.models import registry
from edgetwin.models.bandwidth_axis import zero_crossing_mbps
from edgetwin.models.registry import CandidateKey
from edgetwin.plan.answer_stats import Cell, best_variant, mean_of
from edgetwin.plan.questions import Crossover
from edgetwin.results import ResultRow


def _one_device(key: CandidateKey) -> bool:
    return registry.strategy(key.strategy).one_device


def crossover(
    kind: Crossover,
    grouped: dict[CandidateKey, dict[Cell, list[ResultRow]]],
    batches: Sequence[int],
    bandwidths: Sequence[float],
    fleet_sizes: Sequence[int],
) -> dict[str, Any]:
    """Per batch and fleet size: the bandwidth from which the best variant beats one device
    (``bandwidths`` in increasing order)."""
    bws = list(bandwidths)
    single = next(cells for key, cells in grouped.items() if _one_device(key))
    curves = []
    for devices in sorted(fleet_sizes):
        variants = {
            k: cells for k, cells in grouped.items() if not _one_device(k) and k[1] == devices
        }
        for batch in batches:
            single_ms = [mean_of(single[(batch, bw)], "total_ms") for bw in bws]
            best = [best_variant(variants, (batch, bw)) for bw in bws]
            curves.append(
                {
                    "batch": batch,
                    "devices": devices,
                    "bandwidths_mbps": bws,
                    "single_ms": single_ms,
                    "distributed_ms": [b[1] for b in best],
                    "best_variant": [b[0] for b in best],
                    **crossing(bws, single_ms, [b[1] for b in best]),
                }
            )
    return {"strategy": kind.strategy.name, "curves": curves}


def crossing(
    bandwidths: Sequence[float], single_ms: Sequence[float | None], other_ms: Sequence[float | None]
) -> dict[str, Any]:
    """Where ``other`` starts beating ``single`` for good (linear in 1 / bandwidth between
    grid points).

    ``status``: ``crossover`` (``crossover_mbps`` set, ``between_mbps`` the two swept
    bandwidths around it), ``always`` (wins at every swept bandwidth) or ``never`` (loses
    at the highest one). A side that failed (None: out of memory, a device lost) loses to
    one that ran; where both failed, ``other`` does not win. Next to a failed run there is
    nothing to interpolate: the crossover is the higher bandwidth (``interpolated`` false).
    """
    diff = [_lead(s, o) for s, o in zip(single_ms, other_ms, strict=True)]
    first = len(diff)
    while first > 0 and diff[first - 1] < 0:
        first -= 1
    if first in (0, len(diff)):
        status = "always" if first == 0 else "never"
        return {"status": status, "crossover_mbps": None, "between_mbps": None}
    lo, hi = diff[first - 1], diff[first]
    b0, b1 = bandwidths[first - 1], bandwidths[first]
    interpolated = not (math.isinf(lo) or math.isinf(hi))
    at = zero_crossing_mbps(b0, b1, lo, hi) if interpolated else b1
    return {
        "status": "crossover",
        "crossover_mbps": round(at, 3),
        "between_mbps": [b0, b1],
        "interpolated": interpolated,
    }


def _lead(single_ms: float | None, other_ms: float | None) -> float:
    """How much slower ``other`` is than ``single`` (negative: it wins); a failure is
    infinitely slow."""
    if other_ms is None:
        return math.inf
    if single_ms is None:
        return -math.inf
    return other_ms - single_ms
