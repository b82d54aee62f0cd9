"""The ground truth of an adaptive evaluation: the twin's rows at the held-out conditions,
or a table's measured runs, as condition -> candidate label -> latency and energy (NaN:
the run failed), each row named by its candidate as the map names it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from edgetwin.errors import InputError
from edgetwin.evaluate.adaptive_scores import ConditionKey, baseline_label
from edgetwin.evaluate.measured import SkippedCell, measured_cells
from edgetwin.models.registry import CandidateKey
from edgetwin.policies.perf_map import Estimate, PerformanceMap
from edgetwin.policies.perf_map_from_rows import grid_cell
from edgetwin.results import ResultRow

Cell = tuple[int, float, int, int | None]  # batch, bandwidth_mbps, tokens, output tokens


def truth_by_condition(
    rows: list[ResultRow], devices_up: Sequence[int]
) -> dict[ConditionKey, dict[str, Estimate]]:
    """Held-out rows as condition -> candidate label -> latency and energy (NaN: failed);
    with N devices up, every candidate run on at most N devices, fewest devices first."""
    by_cell: dict[Cell, list[ResultRow]] = {}
    for r in sorted(rows, key=lambda r: r.devices):
        tokens, output, _, _ = grid_cell(r, 0)  # rows_at_tokens tags every encoder row
        by_cell.setdefault((r.batch, r.bandwidth_mbps, tokens, output), []).append(r)
    truth = {
        (batch, bw, up, tokens, output): {
            candidate_key(r).label: _estimate(r) for r in here if r.devices <= up
        }
        for (batch, bw, tokens, output), here in by_cell.items()
        for up in devices_up
    }
    return dict(sorted(truth.items()))


def measured_candidates(
    perf_map: PerformanceMap, rows: Sequence[ResultRow], table: Path | None
) -> PerformanceMap:
    """The map cut to the candidates the measurements have (policies pick among them)."""
    measured = {candidate_key(r).label for r in rows}
    if baseline_label() not in measured:
        raise InputError(table, None, f"no measured row of {baseline_label()}")
    kept = tuple(c for c in perf_map.candidates if c.label in measured)
    return perf_map.model_copy(update={"candidates": kept})


def measured_truth(
    rows: Sequence[ResultRow],
    perf_map: PerformanceMap,
    skipped: list[SkippedCell],
    table: Path | None,
    ranked: tuple[str, ...],
) -> dict[ConditionKey, dict[str, Estimate]]:
    """Measured cells that have every candidate of the map, each with the ``ranked``
    columns (the others go to ``skipped``: an unmeasured energy made a regret of inf), as
    condition -> candidate label -> latency and energy. A failed run counts as measured:
    there the candidate is infeasible."""
    truth: dict[ConditionKey, dict[str, Estimate]] = {}
    up = max(r.devices for r in rows)  # the set-up's devices, at every cell
    for batch, bw, tokens, output in measured_cells(rows):
        at_cell = [
            r
            for r in rows
            if (r.batch, r.bandwidth_mbps, r.tokens, r.output_tokens) == (batch, bw, tokens, output)
        ]
        here = {candidate_key(r).label: _estimate(r) for r in at_cell}
        here_ranked = {candidate_key(r).label for r in at_cell if _ranked_known(r, ranked)}
        missing = tuple(
            c.label for c in perf_map.candidates if c.devices <= up and c.label not in here_ranked
        )
        if missing:
            skipped.append(SkippedCell(batch, bw, tokens, missing, output))
        else:
            truth[(batch, bw, up, tokens, output)] = here
    if not truth:
        problem = "no measured cell has every candidate the policies pick from"
        raise InputError(table, None, f"{problem}, each with {' and '.join(ranked)}")
    return truth


def _ranked_known(row: ResultRow, ranked: tuple[str, ...]) -> bool:
    """A failed run, or one with a value in every ``ranked`` column."""
    values = [getattr(row, column) for column in ranked]
    return not row.ok or all(v is not None and math.isfinite(v) for v in values)


def named_as_in_map(row: ResultRow, perf_map: PerformanceMap) -> ResultRow:
    """A twin row named by the CR of the map's candidate that runs its segments: a table
    names a candidate by the CR it ran (``edgetwin run``'s ``cr`` column: the one used),
    the twin by the one requested."""
    if row.cr is None or row.segments is None:
        return row
    tokens = grid_cell(row, perf_map.tokens[0])[0]
    for candidate in perf_map.candidates:
        same = (candidate.strategy, candidate.devices) == (row.strategy, row.devices)
        if same and candidate.segments(tokens) == row.segments:
            return replace(row, cr=candidate.cr)
    return row


def candidate_key(row: ResultRow) -> CandidateKey:
    """A row's candidate (by CR, as the map knows it, not by the segments it resolves to)."""
    return CandidateKey(row.strategy, row.devices, row.cr)


def _estimate(row: ResultRow) -> Estimate:
    ok = row.ok

    def value(measured: float | None) -> float:
        return measured if ok and measured is not None else math.nan

    return Estimate(
        latency_ms=value(row.total_ms),
        energy_j=value(row.energy_j),
        ttft_ms=value(row.ttft_ms),
        tpot_ms=value(row.tpot_ms),
    )
