"""The best mode question: per metric, workload and (batch, bandwidth), the candidate
with the lowest mean, and the Pareto front of batch latency vs energy per sample."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from edgetwin.models.registry import CandidateKey
from edgetwin.plan.answer_stats import Cell, best_variant, group, mean_of
from edgetwin.results import ResultRow, as_in_table
from edgetwin.scenario import Scenario


def best_mode(
    rows: Sequence[ResultRow],
    scenario: Scenario,
    batches: Sequence[int],
    bandwidths: Sequence[float],
    metrics: Sequence[str] = ("total_ms",),
) -> dict[str, Any]:
    """Per metric and workload (a decoder's prompt and output lengths; one for an encoder):
    the candidate with the lowest mean per (batch, bandwidth), under ``grids`` (``best`` and
    ``best_ms``: the first grid's, as before decoders); per workload, the Pareto front of
    batch latency vs J/sample over its swept configurations (``pareto``, each point naming
    its workload); ``strategy_of``: each candidate's strategy (its colour in figures).
    Candidates are named by ``candidate_of``: a decoder's Prism as the scenario asks for it."""
    workloads = list(dict.fromkeys((r.prompt_tokens, r.output_tokens) for r in rows))
    grids = []
    fronts = []
    for prompt, output in workloads:
        this_workload = (r for r in rows if (r.prompt_tokens, r.output_tokens) == (prompt, output))
        mine = group(this_workload, scenario)
        for metric in metrics:
            best = [[best_variant(mine, (b, bw), metric) for bw in bandwidths] for b in batches]
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
        "strategy_of": {
            k.label: k.strategy for k in sorted(group(rows, scenario), key=lambda k: k.order)
        },
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
                        "energy_j_per_sample": as_in_table(energy / batch),
                    }
                )
    return points


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
