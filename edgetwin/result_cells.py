"""Reading a results table's cells: each column's type and range, the columns of older
files, a record as a ``ResultRow`` and a ``results.csv`` as rows; a bad cell is a
``CellError`` naming its column."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, fields
from functools import cache, partial
from pathlib import Path
from typing import Any

from edgetwin.crowd_spec import MAX_PHONES
from edgetwin.errors import InputError, shown
from edgetwin.models import registry
from edgetwin.results import COLUMNS, MODES, TIMING_COLUMNS, ResultRow, format_cell, read_status
from edgetwin.schema import MAX_BATCH
from edgetwin.table_files import read_table

_FIELD_TYPES = {f.name: str(f.type) for f in fields(ResultRow)}
_KEYED_COLUMNS = ("scenario", "mode", "strategy", "devices", "batch", "bandwidth_mbps", "rep")
_EMPTY: dict[str, Any] = {**dict.fromkeys(TIMING_COLUMNS, math.nan), "bytes_sent": 0}
# numbers that are counts or sizes of something that runs (more than 0); every other number
# is a time, an energy, a size or a count of what happened (0 or more), but for one
_POSITIVE_COLUMNS = frozenset(
    {"devices", "batch", "bandwidth_mbps", "cr", "segments", "tokens", "inputs", "stages"}
    | {"prompt_tokens", "output_tokens"}
)
_SIGNED_COLUMNS = frozenset(("link_error_pct",))  # the measured link's rate off its target
# a count past which no run goes (a scenario refuses it); a crowd row's devices are its
# phones, whose bound is above a split model's ranks' (scenario.MAX_DEVICES)
_MAXIMA = {"batch": MAX_BATCH, "devices": MAX_PHONES}


def parse_number(text: str | None) -> float | None:
    """A CSV cell as a finite float, or None when empty; ``ValueError`` if it is not one."""
    if text is None or text.strip() == "":
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{shown(text)} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{shown(text)} is not a finite number")
    return value


def required_number(text: str | None) -> float:
    """A CSV cell as a finite float; ``ValueError`` if it is empty or not one."""
    value = parse_number(text)
    if value is None:
        raise ValueError("empty cell")
    return value


def whole_number(text: str) -> int:
    """A cell holding a whole number (``4`` or ``4.0``)."""
    value = required_number(text)
    if not value.is_integer():
        raise ValueError(f"{shown(text)} is not a whole number")
    return int(value)


def _mode(text: str) -> str:
    if text not in MODES:
        raise ValueError(f"{shown(text)} is not one of {', '.join(MODES)}")
    return text


def _strategy_name(text: str) -> str:
    return registry.strategy(text).name  # ValueError naming the known ones


class CellError(ValueError):
    """A cell of a results table that is missing or not of its column's type."""

    def __init__(self, column: str, problem: str) -> None:
        self.column = column
        self.problem = problem
        super().__init__(f"column {column!r}: {problem}")


def _cell(record: Mapping[str, str | None], column: str, parse: Callable[[Any], Any]) -> Any:
    """``parse`` of ``record[column]``; a missing column or a bad cell is a CellError."""
    if column not in record:
        raise CellError(column, "no such column")
    try:
        return parse(record[column])
    except (TypeError, ValueError, OverflowError) as exc:
        raise CellError(column, str(exc)) from None


def read_results(path: Path) -> list[ResultRow]:
    """A ``results.csv`` (or a ``results.parquet``) as rows; empty timing cells (failed
    runs) read as NaN. A missing column, a cell that is not of its column's type, or an
    empty timing on a row whose status is ``ok`` is an ``InputError`` naming the column
    and the line (the row, counted from 0, of a parquet file)."""
    rows = []
    for index, record in enumerate(read_table(path, (*_KEYED_COLUMNS, "total_ms"))):
        try:
            rows.append(_timed_if_ok(parse_result(record), record))
        except CellError as exc:
            problem = f"{record_place(path, index)}: {exc.problem}"
            raise InputError(path, exc.column, problem) from None
    return rows


def check_row(row: ResultRow) -> None:
    """``row`` as ``write_results`` writes it must read back as ``read_results`` reads it
    (each cell of its column's type and range, the times of a row whose status is ``ok``);
    else a ``CellError`` naming the column. For rows that no run made just now (a plan's
    journal)."""
    record = {column: format_cell(value) for column, value in asdict(row).items()}
    _timed_if_ok(parse_result(record), record)


def _timed_if_ok(row: ResultRow, record: Mapping[str, str]) -> ResultRow:
    """``row``, unless its status is ``ok`` and a timing column it has is empty: a
    ``CellError`` (a run that failed says why in its status)."""
    if row.ok:
        for column in TIMING_COLUMNS:
            if column in record and math.isnan(getattr(row, column)):
                raise CellError(column, "empty on a row whose status is ok")
    return row


def record_place(path: Path, index: int) -> str:
    """Where the record ``index`` (from 0) of a table file is: a CSV's line (its header is
    line 1), a parquet file's row (from 0)."""
    return f"row {index}" if path.suffix == ".parquet" else f"line {index + 2}"


def parse_result(record: Mapping[str, str]) -> ResultRow:
    """One record of ``results.csv`` (as read by ``read_table``) as a ResultRow; a
    missing column or a bad cell is a ``CellError`` naming the column.

    A crowd row of a file written before ``load_ms`` had its loads in ``staging_ms``; a
    decoder row written before ``prefix_agreement_vs_single``, ``tokens_match_single``
    (``_prefix_agreement``); a crowd row written before ``peak_session_mb``, ``peak_rss_mb``
    (``_peak_session``)."""
    if record.get("inputs") and "load_ms" not in record:
        record = {**record, "load_ms": record.get("staging_ms") or "", "staging_ms": "0"}
    if _OLD_PEAK in record and "peak_session_mb" not in record:
        record = {**record, "peak_session_mb": _peak_session(record)}
    if _OLD_AGREEMENT in record and "prefix_agreement_vs_single" not in record:
        record = {**record, "prefix_agreement_vs_single": _prefix_agreement(record)}
    optional = {c: record.get(c) for c in COLUMNS if c not in _KEYED_COLUMNS}
    check_workload(record)
    return ResultRow(
        **{c: _cell(record, c, _cell_parser(c)) for c in _KEYED_COLUMNS},
        **{c: _cell(optional, c, _cell_parser(c)) for c in optional},
    )


_WORKLOAD_COLUMNS = ("prompt_tokens", "output_tokens")  # a decoder row's: both or neither


def check_workload(row: Mapping[str, object]) -> None:
    """A ``CellError`` naming the one of a decoder's workload columns that is empty while
    the other is given (the row's key needs both: it was a traceback, or an encoder's)."""
    given = [c for c in _WORKLOAD_COLUMNS if row.get(c) not in (None, "")]
    if len(given) == 1:
        (empty,) = (c for c in _WORKLOAD_COLUMNS if c not in given)
        raise CellError(empty, f"empty while {given[0]} is given: a decoder's row has both")


_OLD_AGREEMENT = "tokens_match_single"  # every token compared, those after a divergence too


def _prefix_agreement(record: Mapping[str, str]) -> str:
    """An older file's ``tokens_match_single`` as ``prefix_agreement_vs_single``: 1 (every
    token equal) is the same on both; any other share counted tokens after the first
    difference, which says nothing of where it was: empty."""
    try:
        return "1" if float(record[_OLD_AGREEMENT]) == 1.0 else ""
    except ValueError:
        return ""


_OLD_PEAK = "peak_rss_mb"  # the twin's session RAM; a real worker's whole process RSS


def _peak_session(record: Mapping[str, str]) -> str:
    """An older file's ``peak_rss_mb`` as ``peak_session_mb``: a twin row's meant the same
    (its sessions' RAM); a real row's was its worker process's RSS, interpreter and
    libraries included, which says nothing of its sessions': empty."""
    return record[_OLD_PEAK] if record.get("mode") == "twin" else ""


def check_cells(record: Mapping[str, str | None], columns: Iterable[str]) -> None:
    """Each of ``columns`` that ``record`` has must read as ``parse_result`` reads it (a
    known strategy, a count or time in its range, a finite number); else a ``CellError``
    naming the column. For tables with only some of the columns (a published one)."""
    for column in columns:
        if column in record:
            _cell(record, column, _cell_parser(column))


@cache
def _cell_parser(column: str) -> Callable[[Any], Any]:
    """How a cell of ``column`` is read: the keyed columns are required, a status is
    ``read_status``'s, the others typed as their ResultRow field (``_typed``); made once per
    column, not per cell."""
    own: dict[str, Callable[[Any], Any]] = {
        "scenario": str,
        "mode": _mode,
        "strategy": _strategy_name,
        "bandwidth_mbps": partial(_in_range, "bandwidth_mbps", required_number),
        "status": read_status,
    }
    if column in own:
        return own[column]
    if column in _KEYED_COLUMNS:  # devices, batch, rep
        return partial(_in_range, column, whole_number)
    return partial(_typed, column)


def _typed(column: str, text: str | None) -> Any:
    """A cell of a column that may be empty, typed as the ResultRow field says: an empty
    timing is NaN (a failed run), empty bytes 0, else None (a status: ``read_status``)."""
    if text is None or text.strip() == "":
        return _EMPTY.get(column)
    kind = _FIELD_TYPES[column]
    if "str" in kind:
        return text
    return _in_range(column, whole_number if kind.startswith("int") else required_number, text)


def _in_range(column: str, parse: Callable[[str], float], text: str) -> Any:
    """``parse(text)``, which must be more than 0 for a count or size of what runs and 0
    or more for other numbers (a link's error may be either sign), and at most a count's
    maximum (``_MAXIMA``); else ``ValueError``."""
    value = parse(text)
    if column in _POSITIVE_COLUMNS and value <= 0:
        raise ValueError(f"{shown(text)}: must be more than 0")
    if column in _MAXIMA and value > _MAXIMA[column]:
        raise ValueError(f"{shown(text)}: must be at most {_MAXIMA[column]}")
    if column not in _SIGNED_COLUMNS and value < 0:
        raise ValueError(f"{shown(text)}: must be 0 or more")
    return value
