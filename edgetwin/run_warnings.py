"""What a run, a plan or an evaluation warned about, kept in its folder: ``warnings.json``,
a JSON list of the lines the console printed (a setting its mode does not play, a schedule
step no run reached, a link short of its rate, a weight its objective does not read), so
that its page, ``load_results`` and ``edgetwin report`` show them wherever the folder is
read. A command that warned of nothing writes none (nor did an older edgetwin)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from edgetwin.atomic import write_text_atomic
from edgetwin.csv_rows import read_bytes
from edgetwin.errors import InputError
from edgetwin.schema import utf8_text

WARNINGS_FILE = "warnings.json"  # a run's warnings, as its console printed them


def warnings_json(warnings: Sequence[str]) -> str:
    """The text of ``warnings.json``: one warning a line of the list."""
    return json.dumps(list(warnings), indent=2) + "\n"


def read_run_warnings(path: Path, data: bytes) -> tuple[str, ...]:
    """``warnings.json``'s warnings from ``data``, read from ``path``; one that is not a
    list of lines of text is an InputError naming it (and the entry)."""
    try:
        warnings = json.loads(utf8_text(path, data))
    except json.JSONDecodeError as exc:
        raise InputError(path, None, f"not a list of warnings: {exc}") from None
    if not isinstance(warnings, list):
        raise InputError(path, None, "not a list of warnings (a JSON list of strings)")
    for index, warning in enumerate(warnings):
        if not isinstance(warning, str) or not warning:
            raise InputError(path, str(index), "not a warning (a line of text)")
    return tuple(warnings)


def write_warnings_file(folder: Path, warnings: Sequence[str]) -> None:
    """``folder/warnings.json`` written atomically; none (an older one removed) without
    warnings."""
    path = folder / WARNINGS_FILE
    if warnings:
        write_text_atomic(path, warnings_json(warnings))
    else:
        path.unlink(missing_ok=True)


def read_warnings_file(folder: Path) -> tuple[str, ...]:
    """The warnings of ``folder/warnings.json``; none without the file."""
    path = folder / WARNINGS_FILE
    return read_run_warnings(path, read_bytes(path)) if path.exists() else ()


def shown_once(*lists: Iterable[str]) -> list[str]:
    """The warnings of ``lists``, in order, each once (a run's link warning is also the
    one its page works out from ``link_check.csv``)."""
    return list(dict.fromkeys(warning for warnings in lists for warning in warnings))
