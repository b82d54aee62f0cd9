"""Answers to the questions from the rows of a sweep (JSON-ready dicts).

Statistics are over repetitions of a configuration: the mean for crossover
and best mode, the 95th percentile (numpy's linear method) for the fleet
question. A configuration with any failed repetition (out of memory, a
device lost) counts as not meeting anything. The answers as text:
``answer_text``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from edgetwin.decoder_spec import DecoderSpec
from edgetwin.models import registry
from edgetwin.models.registry import CandidateKey
from edgetwin.plan.capacity import crowd_capacity
from edgetwin.plan.questions import (
    AnyKind,
    BestMode,
    Crossover,
    CrowdAxes,
    CrowdCapacity,
    LoadedQuestion,
    LongestContext,
    SmallestFleet,
)
from edgetwin.results import ResultRow
from edgetwin.scenario import Scenario, configurations

Cell = tuple[int, float]  # batch, bandwidth_mbps
QUESTIONS = "questions"  # the kind of a file that lists several questions


def _one_device(key: CandidateKey) -> bool:
    return registry.strategy(key.strategy).one_device


def group(rows: Iterable[ResultRow]) -> dict[CandidateKey, dict[Cell, list[ResultRow]]]:
    """Rows by candidate (strategy, devices, cr, segments), then by (batch, bandwidth)."""
    grouped: dict[CandidateKey, dict[Cell, list[ResultRow]]] = defaultdict(dict)
    for row in rows:
        key = CandidateKey(row.strategy, row.devices, row.cr, row.segments)
        grouped[key].setdefault((row.batch, row.bandwidth_mbps), []).append(row)
    return dict(grouped)


def mean_of(rows: Sequence[ResultRow], column: str) -> float | None:
    """Mean of a column over repetitions; None if a repetition failed."""
    if any(not r.ok for r in rows):
        return None
    return float(np.mean([getattr(r, column) for r in rows]))


def p95_ms(rows: Sequence[ResultRow]) -> float | None:
    """95th percentile of total_ms over repetitions; None if a repetition failed."""
    if any(not r.ok for r in rows):
        return None
    return float(np.percentile([r.total_ms for r in rows], 95))


def answer(loaded: LoadedQuestion, rows: Sequence[ResultRow]) -> dict[str, Any]:
    """The answer to the question from its sweep's rows (a list of questions: one answer
    each, under ``answers``)."""
    question = loaded.question
    answers = [{"kind": kind.kind} | _answer_one(loaded, kind, rows) for kind in question.kinds]
    if len(answers) == 1:
        return {"question": question.name} | answers[0]
    return {"question": question.name, "kind": QUESTIONS, "answers": answers}


def _answer_one(loaded: LoadedQuestion, kind: AnyKind, rows: Sequence[ResultRow]) -> dict[str, Any]:
    axes = loaded.question.axes
    if isinstance(axes, CrowdAxes):
        assert isinstance(kind, CrowdCapacity)
        return crowd_capacity(kind, loaded.scenario, axes.fleet_size, rows)
    grid_rows = len(configurations(loaded.scenario)) * loaded.scenario.repetitions
    grid, searched = rows[:grid_rows], rows[grid_rows:]  # the searches' units come last
    if isinstance(kind, LongestContext):
        return longest_context(searched, loaded.scenario)
    # answers and their figures go up each axis, whatever order the question lists it in
    batches, bandwidths = sorted(axes.batch), sorted(axes.bandwidth_mbps)
    if isinstance(kind, BestMode):
        return best_mode(grid, batches, bandwidths, kind.metrics)
    grouped = group(grid)
    if isinstance(kind, SmallestFleet):
        return smallest_fleet(kind, grouped, batches, bandwidths)
    assert isinstance(kind, Crossover)
    return crossover(kind, grouped, batches, bandwidths, axes.devices)


def smallest_fleet(
    kind: SmallestFleet,
    grouped: dict[CandidateKey, dict[Cell, list[ResultRow]]],
    batches: Sequence[int],
    bandwidths: Sequence[float],
) -> dict[str, Any]:
    """Per batch: p95 over devices x bandwidth and the smallest fleet / bandwidth meeting it."""
    target = kind.target_p95_ms
    by_devices = {k.devices: cells for k, cells in grouped.items() if k.devices is not None}
    devices = sorted(by_devices)
    per_batch = []
    for batch in batches:
        grid = [[p95_ms(by_devices[d][(batch, bw)]) for bw in bandwidths] for d in devices]
        meets = [
            (d, bw)
            for d, row in zip(devices, grid, strict=True)
            for bw, value in zip(bandwidths, row, strict=True)
            if meets_target(value, target)
        ]
        fleet = min(meets, key=lambda m: (m[0], m[1]), default=None)
        link = min(meets, key=lambda m: (m[1], m[0]), default=None)
        per_batch.append(
            {
                "batch": batch,
                "p95_ms": grid,
                "min_bandwidth_mbps_by_devices": [
                    min((bw for dd, bw in meets if dd == d), default=None) for d in devices
                ],
                "smallest_fleet": _point(fleet),
                "smallest_bandwidth": _point(link),
            }
        )
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


def meets_target(p95_ms: float | None, target_p95_ms: float) -> bool:
    """Whether a configuration's p95 meets the target (None: a repetition failed)."""
    return p95_ms is not None and p95_ms <= target_p95_ms


def _point(point: tuple[int, float] | None) -> dict[str, float] | None:
    return None if point is None else {"devices": point[0], "bandwidth_mbps": point[1]}


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
            best = [_best(variants, (batch, bw)) for bw in bws]
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


def _best(
    variants: dict[CandidateKey, dict[Cell, list[ResultRow]]],
    cell: Cell,
    metric: str = "total_ms",
) -> tuple[str | None, float | None]:
    """The variant with the lowest mean ``metric`` (latency) at a cell, and its value."""
    scored = [
        (value, key.label)
        for key, cells in variants.items()
        if (value := mean_of(cells[cell], metric)) is not None
    ]
    if not scored:
        return None, None
    value, name = min(scored)
    return name, value


def crossing(
    bandwidths: Sequence[float], single_ms: Sequence[float | None], other_ms: Sequence[float | None]
) -> dict[str, Any]:
    """Where ``other`` starts beating ``single`` for good (linear between grid points).

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
    at = b0 + (b1 - b0) * lo / (lo - hi) if interpolated else b1
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


def best_mode(
    rows: Sequence[ResultRow],
    batches: Sequence[int],
    bandwidths: Sequence[float],
    metrics: Sequence[str] = ("total_ms",),
) -> dict[str, Any]:
    """Per metric and workload (a decoder's prompt and output lengths; one for an encoder):
    the candidate with the lowest mean per (batch, bandwidth), under ``grids`` (``best`` and
    ``best_ms``: the first grid's, as before decoders); per workload, the Pareto front of
    batch latency vs J/sample over its swept configurations (``pareto``, each point naming
    its workload); ``strategy_of``: each candidate's strategy (its colour in figures)."""
    workloads = list(dict.fromkeys((r.prompt_tokens, r.output_tokens) for r in rows))
    grids = []
    fronts = []
    for prompt, output in workloads:
        mine = group(r for r in rows if (r.prompt_tokens, r.output_tokens) == (prompt, output))
        for metric in metrics:
            best = [[_best(mine, (b, bw), metric) for bw in bandwidths] for b in batches]
            grids.append(
                {
                    "metric": metric,
                    "prompt_tokens": prompt,
                    "output_tokens": output,
                    "best": [[name for name, _ in row] for row in best],
                    "best_value": [[value for _, value in row] for row in best],
                }
            )
        fronts += pareto_front(_pareto_points(mine, prompt, output))
    return {
        "batches": list(batches),
        "bandwidths_mbps": list(bandwidths),
        "grids": grids,
        "best": grids[0]["best"],
        "best_ms": grids[0]["best_value"],
        "pareto": fronts,
        "strategy_of": {k.label: k.strategy for k in sorted(group(rows), key=lambda k: k.order)},
    }


def _pareto_points(
    variants: dict[CandidateKey, dict[Cell, list[ResultRow]]],
    prompt_tokens: int | None,
    output_tokens: int | None,
) -> list[dict[str, Any]]:
    """Every configuration of one workload that ran: its batch latency and J/sample."""
    points = []
    for key, cells in variants.items():
        for (batch, bw), reps in cells.items():
            latency = mean_of(reps, "total_ms")
            energy = mean_of(reps, "energy_j")
            if latency is not None and energy is not None:
                points.append(
                    {
                        "candidate": key.label,
                        "strategy": key.strategy,
                        "batch": batch,
                        "bandwidth_mbps": bw,
                        "prompt_tokens": prompt_tokens,
                        "output_tokens": output_tokens,
                        "latency_ms": latency,
                        "energy_j_per_sample": energy / batch,
                    }
                )
    return points


def longest_context(rows: Sequence[ResultRow], scenario: Scenario) -> dict[str, Any]:
    """Per candidate, batch and output length: the longest prompt whose twin run finished
    (the search's rows: the longest that fits, and one token more, which ran out of memory),
    what stopped it (``positions``: the model's, else the out-of-memory status) and its
    row's memory and times."""
    model = scenario.model
    assert isinstance(model, DecoderSpec)
    searches: dict[tuple[CandidateKey, int, int | None], list[ResultRow]] = defaultdict(list)
    for row in rows:
        key = CandidateKey(row.strategy, row.devices, row.cr, row.segments)
        searches[(key, row.batch, row.output_tokens)].append(row)
    entries = []
    for (key, batch, output), found in searches.items():
        fits = [r for r in found if r.ok]
        failed = [r for r in found if not r.ok]
        longest = max(fits, key=lambda r: r.prompt_tokens or 0, default=None)
        entries.append(
            {
                "candidate": key.label,
                "strategy": key.strategy,
                "devices": key.devices,
                "batch": batch,
                "output_tokens": output,
                "longest_prompt_tokens": None if longest is None else longest.prompt_tokens,
                "stopped_by": failed[0].status if failed else "positions",
                "weights_mb": found[0].weights_mb,
                "kv_cache_mb": None if longest is None else longest.kv_cache_mb,
                "ttft_ms": None if longest is None else longest.ttft_ms,
                "tpot_ms": None if longest is None else longest.tpot_ms,
            }
        )
    return {"max_positions": model.max_positions, "candidates": entries}


def pareto_front(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Points no other point beats on both latency and energy, by increasing latency; of
    equal points (one device's at every bandwidth) the one with the least bandwidth."""
    front: list[dict[str, Any]] = []
    ordered = sorted(
        points, key=lambda p: (p["latency_ms"], p["energy_j_per_sample"], p["bandwidth_mbps"])
    )
    for point in ordered:
        if not front or point["energy_j_per_sample"] < front[-1]["energy_j_per_sample"]:
            front.append(point)
    return front
