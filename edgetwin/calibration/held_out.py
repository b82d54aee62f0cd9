"""Held-out residuals for the twin's prediction intervals, and their nested coverage.

The points are those of a leave-one-out validation (``trace_holdout.leave_one_out``,
``reference_holdout.leave_one_batch_out_table``, which return them as ``HeldOutRefits``
with their warnings): each predicted by a fit without the value it
was ``held_out`` by, with its measured repetitions (``reps``). A residual is
log(repetition / prediction), so run-to-run noise is inside it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from edgetwin.number_text import exact_text
from edgetwin.profile import DeviceProfile
from edgetwin.results import INTERVAL_METRICS
from edgetwin.sim.intervals import SECTION_OF_METRIC, log_half_width

HoldoutBy = Literal["batch", "bandwidth", "prompt"]  # what validate leaves out in turn
HOLDOUT_NAMES: dict[HoldoutBy, str] = {
    "batch": "batch size",
    "bandwidth": "bandwidth",
    "prompt": "prompt length",
}

COVERAGE_LEVEL = 0.9  # the level validate checks (coverage_90_pct)

Residuals = dict[str, dict[float, list[float]]]  # metric -> held-out value -> residuals


@dataclass(frozen=True)
class HeldOutRefits:
    """What the leave-one-out refits give: the held-out ``points``, and a warning for each
    held-out value that gave a section no points, saying why (``validation: batch 8 gives
    no held-out exchange points: ...``): ``validate``'s warnings, and ``calibrate``'s
    through ``fit.held_out``."""

    points: list[dict[str, Any]]
    warnings: list[str]


def residuals_by_group(points: Sequence[Mapping[str, Any]]) -> Residuals:
    """Log residuals of every repetition of the points of each twin metric, by the value
    their fit held out."""
    residuals: Residuals = defaultdict(lambda: defaultdict(list))
    for point in points:
        metric = str(point["metric"])
        if metric not in INTERVAL_METRICS or float(point["predicted"]) <= 0:
            continue
        group = residuals[metric][float(point["held_out"])]
        group += [math.log(r / float(point["predicted"])) for r in point["reps"] if r > 0]
    return residuals


def held_out_block(refits: HeldOutRefits, by: str) -> dict[str, Any]:
    """What a profile's ``fit.held_out`` keeps: the residuals by held-out value, and the
    refits' warnings (no key where there are none)."""
    residuals = residuals_by_group(refits.points)
    return {
        "by": by,
        "method": "log(measured repetition / leave-one-out prediction)",
        "log_residuals": {
            metric: {_label(v): [round(r, 5) for r in rs] for v, rs in sorted(groups.items())}
            for metric, groups in residuals.items()
        },
        **({"warnings": list(refits.warnings)} if refits.warnings else {}),
    }


def _label(value: float) -> str:
    return format(value, "g")


def nested_coverage(
    points: Sequence[Mapping[str, Any]], level: float = COVERAGE_LEVEL
) -> dict[str, dict[str, float]]:
    """Per metric, the share of held-out repetitions inside their band at ``level``; the
    band of a point held out by value v uses only the residuals of fits without other
    values (a jackknife over held-out values: never the point's own residuals).

    Only twin columns have bands; a total with ``parts`` (an exchange: staging + comm)
    has the sum of its parts' bands, as the twin's. Repetitions whose band is not known
    (too few other residuals) are counted apart (``not_known``)."""
    residuals = residuals_by_group(points)

    def width(metric: str, held_out: float) -> float | None:
        others = [r for v, rs in residuals.get(metric, {}).items() if v != held_out for r in rs]
        return log_half_width(others, level)

    # per metric and held-out value, each repetition's side of its band: -1 below, 0 in, 1 above
    sides: dict[str, dict[float, list[int]]] = defaultdict(lambda: defaultdict(list))
    unknown: dict[str, int] = defaultdict(int)
    for point in points:
        metric, held_out = str(point["metric"]), float(point["held_out"])
        band = _band(point, lambda m, v=held_out: width(m, v))
        if band is None:
            if metric in INTERVAL_METRICS or "parts" in point:
                unknown[metric] += len(point["reps"])
            continue
        sides[metric][held_out] += [(r > band[1]) - (r < band[0]) for r in point["reps"]]
    summary = {metric: _coverage(by_value) for metric, by_value in sides.items()}
    for metric, count in unknown.items():
        summary.setdefault(metric, {"coverage_pct": math.nan, "repetitions": 0, "groups": 0})
        summary[metric]["not_known"] = count
    return summary


def _coverage(sides: Mapping[float, Sequence[int]]) -> dict[str, float]:
    """A metric's coverage from each held-out value's repetitions' sides of their bands (-1
    below, 0 inside, 1 above): the share inside, the repetitions, the held-out values, how
    many fell below and above, and the value held out whose repetitions it covers least
    (a share that the whole hides: a band right for most values and wrong for one)."""
    every = [side for group in sides.values() for side in group]
    share = {v: 100.0 * group.count(0) / len(group) for v, group in sides.items()}
    least = min(share, key=lambda v: (share[v], v))
    return {
        "coverage_pct": round(100.0 * every.count(0) / len(every), 1),
        "repetitions": len(every),
        "groups": len(sides),
        "below": every.count(-1),
        "above": every.count(1),
        "least_pct": round(share[least], 1),
        "least_held_out": least,
    }


def _band(point: Mapping[str, Any], width: Any) -> tuple[float, float] | None:
    """The band of one held-out point, or None when some part's width is not known."""
    parts: Mapping[str, float] = point.get("parts") or {}
    if parts:
        widths = {m: width(m) for m in parts}
        if any(q is None for q in widths.values()):
            return None
        low = sum(v * math.exp(-widths[m]) for m, v in parts.items())
        high = sum(v * math.exp(widths[m]) for m, v in parts.items())
        return low, high
    metric = str(point["metric"])
    if metric not in INTERVAL_METRICS:
        return None
    q = width(metric)
    if q is None:
        return None
    predicted = float(point["predicted"])
    return predicted * math.exp(-q), predicted * math.exp(q)


def with_base_residuals(
    block: dict[str, Any], base: DeviceProfile | None, fitted: Sequence[str]
) -> dict[str, Any]:
    """``block`` plus the base profile's residuals of each metric whose section the fit
    took from the base (not in ``fitted``)."""
    if base is None:
        return block
    inherited = base.fit.get("held_out", {}).get("log_residuals", {})
    taken = {
        metric: groups
        for metric, groups in inherited.items()
        if SECTION_OF_METRIC.get(metric) not in fitted and metric not in block["log_residuals"]
    }
    if not taken:
        return block
    note = f"{', '.join(taken)} from the base profile {base.name}"
    return {**block, "log_residuals": {**block["log_residuals"], **taken}, "inherited": note}


def with_coverage(
    summary: Mapping[str, Mapping[str, float]], coverage: Mapping[str, Mapping[str, float]]
) -> dict[str, dict[str, float]]:
    """The validation summary with each metric's coverage (``coverage_90_pct``, the
    repetitions it counts and those whose band is not known)."""
    merged = {metric: dict(stats) for metric, stats in summary.items()}
    for metric, stats in coverage.items():
        merged[metric]["coverage_90_pct"] = stats["coverage_pct"]
        merged[metric]["coverage_repetitions"] = stats["repetitions"]
        for key in ("below", "above", "least_pct", "least_held_out"):
            if key in stats:
                merged[metric][f"coverage_{key}"] = stats[key]
        if "not_known" in stats:
            merged[metric]["coverage_not_known"] = stats["not_known"]
    return merged


def coverage_text(stats: Mapping[str, float], by: HoldoutBy = "batch") -> str:
    """The coverage part of a validation line ('' when the metric has no band)."""
    if "coverage_90_pct" not in stats:
        return ""
    if stats["coverage_repetitions"] == 0:
        return ", 90 % interval: not known (too few held-out residuals)"
    return (
        f", 90 % interval covers {stats['coverage_90_pct']:.1f} % of "
        f"{stats['coverage_repetitions']:.0f} held-out repetitions ({coverage_detail(stats, by)})"
    )


def coverage_detail(stats: Mapping[str, float], by: HoldoutBy) -> str:
    """Where a metric's band misses: how many repetitions fell below and above it, and the
    value held out whose repetitions it covers least."""
    return (
        f"{stats['coverage_below']:.0f} below, {stats['coverage_above']:.0f} above; least "
        f"{stats['coverage_least_pct']:.1f} % with {HOLDOUT_NAMES[by]} "
        f"{exact_text(stats['coverage_least_held_out'])} held out"
    )
