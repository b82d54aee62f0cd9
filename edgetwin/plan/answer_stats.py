"""Rows of a sweep grouped by candidate and cell, and the statistics over a
configuration's repetitions.

The mean for crossover and best mode, the 95th percentile (numpy's linear method) for
the fleet question, each to the table's 7 significant digits: an answer compares and
shows one figure. A configuration with any failed repetition (out of memory, a device
lost) counts as not meeting anything.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

from edgetwin.models.registry import CandidateKey
from edgetwin.plan.candidates import candidate_of
from edgetwin.results import ResultRow, as_in_table
from edgetwin.scenario import Scenario

Cell = tuple[int, float]  # batch, bandwidth_mbps


def group(
    rows: Iterable[ResultRow], scenario: Scenario
) -> dict[CandidateKey, dict[Cell, list[ResultRow]]]:
    """Rows by candidate (``candidate_of``), then by (batch, bandwidth)."""
    grouped: dict[CandidateKey, dict[Cell, list[ResultRow]]] = defaultdict(dict)
    for row in rows:
        key = candidate_of(row, scenario)
        grouped[key].setdefault((row.batch, row.bandwidth_mbps), []).append(row)
    return dict(grouped)


def mean_of(rows: Sequence[ResultRow], column: str) -> float | None:
    """Mean of a column over repetitions; None if a repetition failed."""
    if any(not r.ok for r in rows):
        return None
    return as_in_table(float(np.mean([getattr(r, column) for r in rows])))


def p95_ms(rows: Sequence[ResultRow]) -> float | None:
    """95th percentile of total_ms over repetitions; None if a repetition failed."""
    if any(not r.ok for r in rows):
        return None
    return as_in_table(float(np.percentile([r.total_ms for r in rows], 95)))


def best_variant(
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
