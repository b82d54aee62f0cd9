"""Ground truth from measurements: a table of measured runs instead of the twin.

The table is in the results schema, or the part of it a published table has: the key
columns (strategy, devices, batch, bandwidth_mbps) and ``total_ms`` (``energy_j`` where
measured; ``cr`` and ``segments`` for Prism; ``tokens`` where the length varies; a
decoder's ``prompt_tokens`` and ``output_tokens``, ``ttft_ms`` and ``tpot_ms``). It can
be a ``results.csv`` of ``--mode local`` or ``--mode emu`` runs, or a hardware table.
A configuration measured several times (``rep``) counts with the median of its
successful repetitions: one slow repetition, disturbed by other work on the machine,
does not move it. Each repetition is one row: a run's (scenario, mode), configuration
and ``rep`` given twice is an error, as a table without ``rep`` giving a configuration
twice is (the median had weighed the row twice).

At each measured cell (batch, bandwidth, tokens, a decoder's output tokens) the devices
up are the set-up's: the most devices any row of the table used. Policies choose among
the candidates the table measured somewhere. A cell where one of those candidates was
not measured cannot be scored: it is skipped, and the evaluation lists it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import median

from edgetwin.comparison import check_reference
from edgetwin.csv_rows import Row, check_once
from edgetwin.errors import InputError
from edgetwin.result_cells import parse_result
from edgetwin.results import MEASURED_MODE, ResultRow
from edgetwin.table_files import read_table

# what a map or a ground truth reads of every row: the latency (without the column every
# cell read as a failed run, and a map of nothing but failures was scored)
SCORED_COLUMNS = ("total_ms",)
# a repetition: a configuration of ``median_per_configuration`` (a decoder's tokens its
# prompt's; a pipeline's layer split) in a run (scenario, mode: a table without them is
# one run), and its rep
REPETITION_KEY = (
    *("scenario", "mode", "strategy", "devices", "cr", "segments", "batch"),
    *("bandwidth_mbps", "tokens", "prompt_tokens", "output_tokens", "layer_split", "rep"),
)


@dataclass(frozen=True)
class SkippedCell:
    """A measured cell that lacks some candidate the policies may pick."""

    batch: int
    bandwidth_mbps: float
    tokens: int
    missing: tuple[str, ...]
    output_tokens: int | None = None  # a decoder's


def read_measured(path: Path, named_by: Path, default_tokens: int) -> list[ResultRow]:
    """The rows of a measured table (``InputError`` naming ``named_by``'s ``truth_table``
    and the line if it is not one); a row with no ``tokens`` ran at ``default_tokens``, a
    decoder's row at its ``prompt_tokens``."""
    check_reference(path, named_by, "truth_table", SCORED_COLUMNS)
    rows, lines = [], []
    for line, record in enumerate(read_table(path), start=2):
        filled = {"scenario": path.stem, "mode": MEASURED_MODE, "rep": "0", **record}
        try:
            row = parse_result(filled)
        except (KeyError, TypeError, ValueError) as exc:
            problem = f"{path.name} line {line} is not a results row: {exc}"
            raise InputError(named_by, "truth_table", problem) from None
        if row.tokens is None:
            tokens = default_tokens if row.prompt_tokens is None else row.prompt_tokens
            row = replace(row, tokens=tokens)
        rows.append(row)
        lines.append(Row(path, line, record))
    header = lines[0].cells  # check_reference refuses a table of no row
    columns = [c for c in REPETITION_KEY if c in header or c == "rep"]  # those it has
    try:
        check_once(lines, columns, [_repetition(row) for row in rows])
    except InputError as exc:  # named as the rows' other errors are
        raise InputError(named_by, "truth_table", f"{path.name} {exc.problem}") from None
    return rows


def _repetition(row: ResultRow) -> tuple[object, ...]:
    """A row's ``REPETITION_KEY``."""
    return (row.scenario, row.mode, *_configuration(row), row.layer_split, row.rep)


def median_per_configuration(rows: Iterable[ResultRow]) -> list[ResultRow]:
    """One row per configuration: the median latency and energy (a decoder's TTFT and
    TPOT) of its successful repetitions (a configuration with none keeps its first row, failed)."""
    groups: dict[tuple[object, ...], list[ResultRow]] = {}
    for row in rows:
        groups.setdefault(_configuration(row), []).append(row)
    merged = []
    for group in groups.values():
        ok = [r for r in group if r.ok and math.isfinite(r.total_ms)]
        if not ok:
            merged.append(group[0])
            continue
        merged.append(
            replace(
                ok[0],
                total_ms=median(r.total_ms for r in ok),
                energy_j=_median(ok, "energy_j"),
                ttft_ms=_median(ok, "ttft_ms"),
                tpot_ms=_median(ok, "tpot_ms"),
            )
        )
    return merged


def _configuration(row: ResultRow) -> tuple[object, ...]:
    """What ``median_per_configuration`` takes the median over the repetitions of."""
    key = (row.strategy, row.devices, row.cr, row.segments, row.batch)
    return (*key, row.bandwidth_mbps, row.tokens, row.output_tokens)


def _median(rows: Sequence[ResultRow], column: str) -> float | None:
    """The median of a column over rows; None where some row lacks it."""
    values = [getattr(r, column) for r in rows if getattr(r, column) is not None]
    return median(values) if len(values) == len(rows) else None


def measured_cells(rows: Sequence[ResultRow]) -> list[tuple[int, float, int, int | None]]:
    """The (batch, bandwidth, tokens, output tokens) cells the table measured, sorted
    (output tokens: None for an encoder's rows)."""
    return sorted({(r.batch, r.bandwidth_mbps, r.tokens or 0, r.output_tokens) for r in rows})
