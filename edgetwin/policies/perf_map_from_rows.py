"""A performance map from the rows of a results table (the twin's, an emulator run's, or
measured rows in the results schema): rows grouped by candidate and grid cell,
repetitions averaged, failed runs null.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from edgetwin.errors import InputError
from edgetwin.models import registry
from edgetwin.number_text import exact_text
from edgetwin.policies.perf_map import PerformanceMap
from edgetwin.policies.perf_map_candidates import CANDIDATES_BY_CR, DECODER_GRIDS
from edgetwin.policies.perf_map_io import validate_map
from edgetwin.result_cells import read_results
from edgetwin.results import ResultRow


def map_from_table(path: Path, default_tokens: int) -> PerformanceMap:
    """A map from a results table (twin, emulator, or measured rows in the results schema);
    rows without a ``tokens`` value ran at ``default_tokens``; rows with ``prompt_tokens``
    (a decoder's) make a decoder map."""
    try:
        rows = read_results(path)
    except (KeyError, ValueError) as exc:
        raise InputError(path, None, f"not a results table: {exc}") from None
    return map_from_rows(rows, path.stem, f"table {path.name}", path, default_tokens)


class Axes(NamedTuple):
    """The profiled values of each axis, increasing (output tokens: None for an encoder)."""

    tokens: list[int]
    output_tokens: list[int] | None
    batches: list[int]
    bandwidths_mbps: list[float]


GridCell = tuple[int, int | None, int, float]  # tokens, output tokens, batch, bandwidth_mbps


def grid_cell(row: ResultRow, default_tokens: int) -> GridCell:
    """Where a row sits in a map's grid: a decoder's prompt and output tokens, an encoder's
    sequence length (``default_tokens`` if the row has none)."""
    if row.prompt_tokens is not None:
        return (row.prompt_tokens, row.output_tokens, row.batch, row.bandwidth_mbps)
    tokens = default_tokens if row.tokens is None else row.tokens
    return (tokens, None, row.batch, row.bandwidth_mbps)


def map_from_rows(
    rows: Iterable[ResultRow],
    scenario: str,
    source: str,
    path: Path | None,
    default_tokens: int,
) -> PerformanceMap:
    """Group rows by candidate and grid cell; repetitions are averaged, failed runs are null."""
    cells: dict[registry.CandidateKey, dict[GridCell, list[ResultRow]]] = defaultdict(dict)
    for row in rows:
        if row.strategy in registry.names() and registry.strategy(row.strategy).selectable:
            cell = grid_cell(row, default_tokens)
            key = registry.CandidateKey(row.strategy, row.devices, row.cr)
            cells[key].setdefault(cell, []).append(row)
    outputs = sorted({o for grid in cells.values() for _, o, _, _ in grid if o is not None})
    axes = Axes(
        sorted({t for grid in cells.values() for t, _, _, _ in grid}),
        outputs or None,
        sorted({b for grid in cells.values() for _, _, b, _ in grid}),
        sorted({bw for grid in cells.values() for _, _, _, bw in grid}),
    )
    by_devices = sorted(cells.items(), key=lambda item: item[0].devices or 0)  # single first
    candidates = [_candidate(key, grid, axes, path) for key, grid in by_devices]
    decoder = {} if axes.output_tokens is None else {"output_tokens": axes.output_tokens}
    raw = {
        "scenario": scenario,
        "source": source,
        "tokens": axes.tokens,
        **decoder,
        "batches": axes.batches,
        "bandwidths_mbps": axes.bandwidths_mbps,
        "candidates": candidates,
    }
    return validate_map(raw, path)


def _candidate(
    key: registry.CandidateKey,
    grid: dict[GridCell, list[ResultRow]],
    axes: Axes,
    path: Path | None,
) -> dict[str, object]:
    strategy, devices, cr = key.strategy, key.devices, key.cr
    if cr is None and registry.strategy(strategy).params:
        problem = (
            f"{strategy} needs its cr (rows on {devices} devices have none): {CANDIDATES_BY_CR}"
        )
        raise InputError(path, "cr", problem)
    tokens, outputs, batches, bandwidths = axes
    for cell in itertools.product(tokens, outputs or (None,), batches, bandwidths):
        if cell not in grid:
            field = f"{strategy} devices={devices}" + (
                "" if cr is None else f" cr={exact_text(cr)}"
            )
            output = "" if cell[1] is None else f", output tokens {exact_text(cell[1])}"
            where = (
                f"tokens {exact_text(cell[0])}{output}, batch {exact_text(cell[2])}, "
                f"bandwidth {exact_text(cell[3])} Mbps"
            )
            raise InputError(path, field, f"no row at {where}")

    def over_grid(column: str, t: int, o: int | None) -> list[list[float | None]]:
        return [[_ok_mean(grid[(t, o, b, bw)], column) for bw in bandwidths] for b in batches]

    def sent(t: int, o: int | None) -> list[float]:
        return [_mean([r.bytes_sent for r in grid[(t, o, b, bandwidths[0])]]) for b in batches]

    first = grid[(tokens[0], None if outputs is None else outputs[0], batches[0], bandwidths[0])][0]
    head = {
        "strategy": strategy,
        "devices": devices,
        "cr": cr,
        "gflops_per_device": first.gflops_per_device,
    }
    if outputs is None:
        return {
            **head,
            "bytes_sent": [sent(t, None) for t in tokens],
            "latency_ms": [over_grid("total_ms", t, None) for t in tokens],
            "energy_j": [over_grid("energy_j", t, None) for t in tokens],
        }
    columns = dict(zip(DECODER_GRIDS, ("total_ms", "energy_j", "ttft_ms", "tpot_ms"), strict=True))
    return {
        **head,
        "bytes_sent": [[sent(t, o) for o in outputs] for t in tokens],
        **{
            key: [[over_grid(column, t, o) for o in outputs] for t in tokens]
            for key, column in columns.items()
        },
    }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _ok_mean(rows: Sequence[ResultRow], column: str) -> float | None:
    """Mean over successful repetitions; None when none succeeded or the value is missing."""
    values = [getattr(r, column) for r in rows if r.ok]
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    return _mean(finite) if finite and len(finite) == len(values) else None
