"""Checked CSV reading shared by the readers: header, row width and typed cells.

Every problem is an InputError naming the file, the column (as the field)
and the line, e.g. ``vit_latency.csv: field 'latency_ms': line 7: 'x' is not a number``.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path

from edgetwin.errors import InputError, shown, shown_text
from edgetwin.number_text import exact_text
from edgetwin.provenance import note_read
from edgetwin.schema import check_regular_file, utf8_text


def read_bytes(path: Path) -> bytes:
    """A file's bytes, its read recorded (provenance); an unreadable file is an InputError
    (a FIFO or /dev/zero too: it would be read forever)."""
    if path.exists():  # a missing one: the read below says it cannot read it
        check_regular_file(path, path, None)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror or exc}") from None
    note_read(path, data)
    return data


def read_text(path: Path) -> str:
    """A file's text (UTF-8, optional BOM); unreadable or non-UTF-8 bytes are InputErrors."""
    return utf8_text(path, read_bytes(path))


def read_header(path: Path) -> list[str]:
    """The column names of a CSV file's first line."""
    text = read_text(path)
    if not text.strip():
        raise InputError(path, None, "empty file")
    try:
        first = next(csv.reader(io.StringIO(text, newline="")), [])
    except csv.Error as exc:
        raise InputError(path, None, f"line 1: malformed CSV: {exc}") from None
    return [name.strip() for name in first]


# a number as a spreadsheet in a comma locale writes it (4,5), or with its thousands
# separated (1,234,567; 1,234.5); one comma before exactly three digits may be either
_DECIMAL_COMMA = re.compile(r"[+-]?\d*,\d+")
_THOUSANDS = re.compile(r"[+-]?[1-9]\d{0,2}(,\d{3})+(\.\d+)?")


def _comma_hint(text: str) -> str:
    """What a number with a comma that float() refuses was likely meant to be, as a hint
    to add to the error: a decimal comma, a thousands separator, or either (1,234)."""
    thousands = _THOUSANDS.fullmatch(text) is not None
    decimal = _DECIMAL_COMMA.fullmatch(text) is not None
    whole = text.replace(",", "")
    if thousands and decimal:
        point = text.replace(",", ".")
        return f" (a decimal comma or a thousands separator? write {point} or {whole})"
    if thousands:
        return f" (a thousands separator? write {whole})"
    return " (a decimal comma? write '.')" if decimal else ""


@dataclass(frozen=True)
class Row:
    """One data row: cells by column name, with typed, checked accessors."""

    path: Path
    line: int
    cells: dict[str, str]

    def error(self, column: str, problem: str) -> InputError:
        return InputError(self.path, column, f"line {self.line}: {problem}")

    def optional_text(self, column: str) -> str | None:
        text = self.cells.get(column, "").strip()
        return text or None

    def text(self, column: str) -> str:
        text = self.optional_text(column)
        if text is None:
            raise self.error(column, "empty cell")
        return text

    def choice(self, column: str, options: Collection[str]) -> str:
        text = self.text(column)
        if text not in options:
            raise self.error(column, f"{text!r} is not one of {', '.join(sorted(options))}")
        return text

    def optional_number(
        self, column: str, minimum: float | None = None, maximum: float | None = None
    ) -> float | None:
        text = self.optional_text(column)
        if text is None:
            return None
        try:
            value = float(text)
        except ValueError:
            raise self.error(column, f"{shown(text)} is not a number{_comma_hint(text)}") from None
        if not math.isfinite(value):
            raise self.error(column, f"{shown(text)} is not a finite number")
        if minimum is not None and value < minimum:
            raise self.error(
                column, f"{exact_text(value)} is below the minimum {exact_text(minimum)}"
            )
        if maximum is not None and value > maximum:  # an int's every digit (2^24: 16777216)
            limit = maximum if isinstance(maximum, int) else f"{exact_text(maximum)}"
            raise self.error(column, f"{exact_text(value)} is above the maximum {limit}")
        return value

    def number(
        self, column: str, minimum: float | None = None, maximum: float | None = None
    ) -> float:
        value = self.optional_number(column, minimum, maximum)
        if value is None:
            raise self.error(column, "empty cell")
        return value

    def optional_positive(self, column: str) -> float | None:
        value = self.optional_number(column)
        if value is not None and value <= 0:
            raise self.error(column, f"{exact_text(value)} must be above 0")
        return value

    def positive(self, column: str) -> float:
        value = self.optional_positive(column)
        if value is None:
            raise self.error(column, "empty cell")
        return value

    def optional_integer(
        self, column: str, minimum: int | None = None, maximum: int | None = None
    ) -> int | None:
        value = self.optional_number(column, minimum, maximum)
        if value is None:
            return None
        if not value.is_integer():
            raise self.error(column, f"{exact_text(value)} is not a whole number")
        try:
            return int(self.cells[column])  # exact for large integers
        except ValueError:
            return int(value)

    def integer(self, column: str, minimum: int | None = None, maximum: int | None = None) -> int:
        value = self.optional_integer(column, minimum, maximum)
        if value is None:
            raise self.error(column, "empty cell")
        return value


def read_rows(
    path: Path,
    required: Sequence[str],
    optional: Sequence[str] = (),
    rows_needed: bool = True,
    text: str | None = None,
) -> list[Row]:
    """Data rows of a CSV whose header has every ``required`` column (``text``: the file's,
    already read).

    Columns beyond ``required`` and ``optional`` are kept in ``Row.cells`` but not checked;
    one that is a column of these in another unit (``latency_us`` for ``latency_ms``) is
    an error where that column is absent (``other_unit``). Blank lines (nothing but spaces
    or empty cells) are skipped; a file with no data row is an error if ``rows_needed``.
    """
    text = read_text(path) if text is None else text
    if not text.strip():
        raise InputError(path, None, f"empty file; expected columns {', '.join(required)}")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = [name.strip() for name in next(reader, [])]
        if not any(header):
            raise InputError(path, None, f"line 1: no header; expected {', '.join(required)}")
        _check_header(path, header, required, optional)
        rows = []
        for cells in reader:
            if not any(cell.strip() for cell in cells):  # spaces, or a spreadsheet's ",,,"
                continue
            if len(cells) != len(header):
                raise InputError(
                    path,
                    None,
                    f"line {reader.line_num}: {len(cells)} cells, the header has {len(header)}",
                )
            rows.append(Row(path, reader.line_num, dict(zip(header, cells, strict=True))))
    except csv.Error as exc:
        raise InputError(path, None, f"line {reader.line_num}: malformed CSV: {exc}") from None
    if not rows and rows_needed:
        raise InputError(path, None, "no data rows after the header")
    return rows


def check_once(rows: Sequence[Row], columns: Sequence[str], keys: Sequence[Hashable]) -> None:
    """An InputError at the first row whose key (its values of ``columns`` as read,
    ``keys``: one a row) an earlier row has, naming both lines and the key's cells: a
    measurement given twice was weighed twice without a word, and two that disagree were
    averaged."""
    first_lines: dict[Hashable, int] = {}
    for row, key in zip(rows, keys, strict=True):
        first = first_lines.setdefault(key, row.line)
        if first != row.line:
            cells = ", ".join(f"{column} {_key_cell(row, column)}" for column in columns)
            fix = (
                "each repetition is one row, with its own rep"
                if "rep" in columns
                else "give each once"
            )
            problem = f"line {row.line} repeats line {first}: {cells}; {fix}"
            raise InputError(row.path, columns[0] if len(columns) == 1 else None, problem)


def _key_cell(row: Row, column: str) -> str:
    """A key's cell as the row has it, ``(empty)`` where it has none."""
    return shown_text(row.optional_text(column) or "(empty)")


def _check_header(
    path: Path, header: list[str], required: Sequence[str], optional: Sequence[str]
) -> None:
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise InputError(path, name, "line 1: column appears twice in the header")
        seen.add(name)
    for name in (*required, *optional):
        if name in seen:
            continue
        in_other = other_unit(header, name)
        if in_other is not None:
            column, unit = in_other
            raise InputError(path, column, f"line 1: the column is {unit_problem(name, unit)}")
        if name in required:
            problem = f"line 1: missing column (header: {', '.join(header)})"
            raise InputError(path, name, problem + header_hint(header, name))


# the units a column's name may end in, by quantity (a name's plain form, ``_plain_name``)
_UNITS = (("ns", "us", "µs", "ms", "s"), ("mj", "j"), ("mw", "w"))


def other_unit(header: Sequence[str], name: str) -> tuple[str, str] | None:
    """The column of ``header`` that is column ``name`` in another unit of its quantity
    (``latency_us`` or ``Latency (s)`` for ``latency_ms``) and that unit; None where none
    is. Units are told by names alone, never guessed from values."""
    stem, _, unit = name.rpartition("_")
    units = next((units for units in _UNITS if unit in units), ())
    for column in header:
        its_stem, _, its_unit = _plain_name(column).rpartition("_")
        if its_stem == stem and its_unit != unit and its_unit in units:
            return column, its_unit
    return None


def unit_problem(name: str, unit: str) -> str:
    """What to do with a column in ``unit`` where column ``name`` is read: ``in us, where
    latency_ms is read in ms (...)``."""
    wanted = name.rpartition("_")[2]
    return (
        f"in {unit}, where {name} is read in {wanted} (edgetwin converts no unit): give "
        f"the values in {wanted} and name the column {name}"
    )


def header_hint(header: Sequence[str], name: str) -> str:
    """What to change in a header that lacks column ``name``: the separator of a
    spreadsheet's export, or a column that is ``name`` in other letters or with its unit
    written out (``Latency (ms)``); empty where neither is seen (or ``name`` is there)."""
    if name in header:
        return ""
    if len(header) == 1:
        for separator, called in ((";", "';'"), ("\t", "tabs")):
            if separator in header[0]:
                return (
                    f"; the file is separated by {called}: edgetwin reads comma-separated "
                    "values with '.' decimals (save it as CSV, UTF-8, in an English locale)"
                )
    for column in header:
        if _plain_name(column) == name:
            return f"; {column!r} in the header: name it {name}"
    return ""


def _plain_name(column: str) -> str:
    """A column name in lower case, its unit in brackets as a suffix: ``latency_ms`` of
    ``Latency (ms)`` and ``latency [ms]``."""
    words = re.sub(r"[\s()\[\]-]+", " ", column.lower()).split()
    return "_".join(words)
