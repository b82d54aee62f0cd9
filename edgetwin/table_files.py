"""Reading a table file: a run folder's results file (``results.csv`` or
``results.parquet``), and a CSV or parquet file as records of strings."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from pathlib import Path

from edgetwin.errors import InputError, shown_text
from edgetwin.file_kinds import not_a_run_folder
from edgetwin.provenance import note_read
from edgetwin.schema import first_repeated

RESULTS_CSV, RESULTS_PARQUET = "results.csv", "results.parquet"
# the suffixes of a table file (``table_records`` reads either)
TABLE_SUFFIXES = (".csv", ".parquet")
# what reading a table file may raise besides an InputError (pyarrow's errors are ValueErrors)
TABLE_READ_ERRORS = (OSError, UnicodeDecodeError, csv.Error, ValueError)


def results_file(folder: Path) -> Path:
    """A run folder's results table: ``results.csv``, else ``results.parquet`` (what ``run
    --format parquet`` writes alone); neither is an ``InputError`` naming the CSV, and a
    file given for the folder one saying what to give instead."""
    try:
        is_file = folder.is_file()
    except OSError:  # a name too long, say: said below
        is_file = False
    if is_file:
        raise InputError(folder, None, not_a_run_folder(folder, (RESULTS_CSV, RESULTS_PARQUET)))
    for name in (RESULTS_CSV, RESULTS_PARQUET):
        try:
            if (folder / name).is_file():
                return folder / name
        except OSError as exc:  # a name too long, say
            raise InputError(folder, None, f"cannot be read: {exc.strerror}") from None
    csv_path = folder / RESULTS_CSV
    if csv_path.exists():  # a folder, a FIFO, a link to a device
        raise InputError(csv_path, None, f"not a regular file (nor is {RESULTS_PARQUET} one)")
    raise InputError(csv_path, None, f"file not found (nor {RESULTS_PARQUET})")


def is_table_file(path: Path) -> bool:
    """Whether ``path`` is a table file (a CSV or a ``.parquet`` file), given where a run
    folder may be: a results table read as the folder's would be."""
    return path.suffix in TABLE_SUFFIXES and path.is_file()


def table_records(
    path: Path, check_header: Callable[[list[str]], None] = lambda _header: None
) -> tuple[list[str], list[dict[str, str]]]:
    """The header and rows of a CSV, or of a ``.parquet`` file with each cell as its
    ``str`` (a float at full precision) and a missing value empty, as in a CSV. Raises one
    of ``TABLE_READ_ERRORS`` where the file cannot be read, a row's cells are not as many
    as the header's columns among them. ``check_header`` sees the header before any row
    is read (a file that is not the table a caller reads is said as such first)."""
    if not path.is_file():  # a folder; a FIFO or /dev/zero would be read forever
        raise ValueError("not a regular file" if path.exists() else "file not found")
    data = path.read_bytes()  # once: parsed and hashed for the provenance
    note_read(path, data)
    if path.suffix == ".parquet":
        import pandas as pd

        frame = pd.read_parquet(io.BytesIO(data))
        header = [str(c) for c in frame.columns]
        check_header(header)
        records = frame.to_dict("records")
        return header, [{c: _parquet_cell(r[c]) for c in header} for r in records]
    reader = csv.reader(io.StringIO(data.decode("utf-8-sig"), newline=""))  # a BOM is no column
    header = next(reader, [])
    twice = first_repeated(header)
    if twice is not None:  # the last of the two was read, unsaid
        raise ValueError(f"line 1: column {twice[1]!r} appears twice in the header")
    check_header(header)
    rows = []
    for cells in reader:
        if not cells:  # a blank line
            continue
        if len(cells) != len(header):  # a row cut short, or run on (was read as empty)
            raise ValueError(
                f"line {reader.line_num}: {len(cells)} cells, the header has {len(header)}"
            )
        rows.append(dict(zip(header, cells, strict=True)))
    return header, rows


def _parquet_cell(value: object) -> str:
    import pandas as pd

    return "" if value is None or pd.isna(value) else str(value)


def read_table(path: Path, required: Sequence[str] = ()) -> list[dict[str, str]]:
    """Read a CSV (or a ``.parquet`` file: ``table_records``) as dicts of strings; a file
    that cannot be read, or whose header lacks a ``required`` column (an empty file has no
    header), is an ``InputError`` naming it."""

    def has_required(header: list[str]) -> None:
        missing = [c for c in required if c not in header]
        if missing:
            found = f"header: {', '.join(header)}" if header else "the file has no header"
            raise InputError(path, missing[0], f"no such column ({shown_text(found)})")

    try:
        _, rows = table_records(path, has_required)
    except TABLE_READ_ERRORS as exc:
        raise InputError(path, None, f"cannot read: {exc}") from None
    return rows
