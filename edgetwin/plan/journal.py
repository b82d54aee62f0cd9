"""Resumable sweeps: finished configurations appended to ``DIR/partial/rows.jsonl``.

One line per finished configuration (all its repetitions, and the network.schedule
steps each of its runs that ran ended before, for the plan's warning), flushed as it
arrives; a line is the configuration's completion marker, and a torn last
line (a run killed mid-write) is dropped on reading. ``sweep.json`` holds a
fingerprint of the swept scenario and a digest of edgetwin's code, so that a
journal is never resumed by a different sweep, nor by other code (whose rows
would mix with the journal's).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict
from pathlib import Path
from typing import IO

from edgetwin.atomic import remove_whole, write_text_atomic
from edgetwin.errors import OUT_OPTION, InputError
from edgetwin.network_spec import BandwidthStep
from edgetwin.output_folder import why_not_written
from edgetwin.plan.sweep import ConfigResult
from edgetwin.result_cells import check_row
from edgetwin.results import ResultRow

PARTIAL = "partial"
ROWS_FILE = "rows.jsonl"  # in PARTIAL: one line per finished configuration
LOCK_FILE = "lock"  # in PARTIAL: held (flock) by the plan writing the journal
SWEEP_FILE = "sweep.json"  # in PARTIAL: the sweep's fingerprint and the code's digest


class JournalBusy(InputError):
    """Another plan holds the journal: it is writing this folder now."""


def fingerprint(scenario_json: str) -> str:
    """SHA-256 of what identifies a sweep (the swept scenario as JSON, and more)."""
    return hashlib.sha256(scenario_json.encode()).hexdigest()


class Journal:
    """The append-only store of finished configurations of one sweep in ``out``, held by
    one plan at a time (``JournalBusy`` for a second, until the first ``unlock``s);
    ``code`` identifies the code that runs the sweep (``provenance.code_digest``)."""

    def __init__(self, out: Path, sweep_fingerprint: str, code: str) -> None:
        self.folder = out / PARTIAL
        self.rows_path = self.folder / ROWS_FILE
        self._lock = _locked(out, self.folder / LOCK_FILE)
        try:
            self._check_sweep({"fingerprint": sweep_fingerprint, "code": code})
        except BaseException:
            self.unlock()
            raise
        self._handle: IO[str] | None = None

    def _check_sweep(self, identity: dict[str, str]) -> None:
        """Mark a new journal with the sweep's fingerprint and the code's digest; refuse
        another sweep's, or one other code ran (a journal written before the digest was
        kept counts as such), or rows without the mark that says whose they are."""
        marker = self.folder / SWEEP_FILE
        if marker.exists():  # a folder in its place holds no mark: a different sweep
            marked = _marked(marker)
            if marked.get("fingerprint") != identity["fingerprint"]:
                problem = f"holds a different sweep; remove it or use another {OUT_OPTION}"
                raise InputError(self.folder, None, problem)
            if marked.get("code") != identity["code"]:
                problem = (
                    "holds a sweep that other edgetwin code ran (it changed since): its rows "
                    f"and this code's would mix; remove it or use another {OUT_OPTION}"
                )
                raise InputError(self.folder, None, problem)
        elif self.rows_path.exists():  # the mark is written before any row: it was removed
            problem = (
                f"holds finished configurations but no {SWEEP_FILE} to say of which sweep; "
                f"remove it or use another {OUT_OPTION}"
            )
            raise InputError(self.folder, None, problem)
        else:
            try:
                write_text_atomic(marker, json.dumps(identity) + "\n")
            except OSError as exc:
                raise _unusable(marker, exc) from None

    def unlock(self) -> None:
        """Let another plan take the journal (the process's end does it too)."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def finished(self) -> dict[int, ConfigResult]:
        """Configurations already done, by index; drops from the file a torn last line and
        everything from a line that is not a journal line (those configurations run again).
        A journal file that cannot be read (a folder in its place) is an InputError."""
        if not self.rows_path.exists():
            return {}
        try:
            return self._recovered()
        except OSError as exc:
            raise _unusable(self.rows_path, exc) from None

    def _recovered(self) -> dict[int, ConfigResult]:
        """The journal's finished configurations, the file cut after the last good line."""
        done: dict[int, ConfigResult] = {}
        good_bytes = 0
        with self.rows_path.open("rb") as handle:
            for line in handle:
                try:
                    result = _journaled(line)
                except (ValueError, KeyError, TypeError):  # torn, or not a journal line
                    break
                done[result.index] = result
                good_bytes += len(line)
        with self.rows_path.open("r+b") as handle:
            handle.truncate(good_bytes)
        return done

    def append(self, result: ConfigResult) -> None:
        """Record one finished configuration (one line, flushed)."""
        if self._handle is None:
            try:
                self._handle = self.rows_path.open("a", encoding="utf-8")
            except OSError as exc:
                raise _unusable(self.rows_path, exc) from None
        record = {
            "index": result.index,
            "rows": [asdict(row) for row in result.rows],
            "unplayed": [[step.model_dump() for step in steps] for steps in result.unplayed],
        }
        self._handle.write(json.dumps(record) + "\n")
        self._handle.flush()

    def close(self) -> None:
        """Close the file; the journal stays for a later resume."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def remove(self) -> None:
        """Delete the journal once the sweep's folder is written (whole: ``remove_whole``)."""
        self.close()
        with suppress(OSError):  # as before: a journal left is refused or resumed later
            remove_whole(self.folder)
        self.unlock()


@contextmanager
def journal_held(out: Path) -> Iterator[None]:
    """Hold ``out``'s journal, if it has one, for as long as the block runs (a forced
    sweep that replaces ``out`` whole); ``JournalBusy`` if another plan holds it."""
    lock = out / PARTIAL / LOCK_FILE
    if not lock.is_file():
        yield
        return
    fd = _locked(out, lock)
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


def _unusable(path: Path, exc: OSError) -> InputError:
    """The error of a file of the journal (``DIR/partial/...``) that cannot be read or
    written (a folder in its place, say): it names the file and the way out."""
    problem = (
        f"cannot be used as the plan's journal: {exc.strerror or exc}; remove "
        f"{path.parent} or use another {OUT_OPTION}"
    )
    return InputError(path, None, problem)


def _locked(out: Path, lock: Path) -> int | None:
    """A descriptor of ``lock`` holding its exclusive flock; ``JournalBusy`` if another
    plan holds it."""
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        problem = f"cannot create the output folder: {why_not_written(lock, exc)}"
        raise InputError(out, OUT_OPTION, problem) from None
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:  # a folder in its place, say
        raise _unusable(lock, exc) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        problem = (
            f"another plan is writing this folder now; wait for it or use another {OUT_OPTION}"
        )
        raise JournalBusy(out, None, problem) from None
    return fd


def _journaled(line: bytes) -> ConfigResult:
    """The finished configuration a journal line records; ``ValueError``, ``KeyError`` or
    ``TypeError`` if it is torn (no line end) or not a journal line: not JSON of an index
    and rows (and its runs' unplayed steps), or a row that would not read back from
    ``results.csv`` (a time below 0, not a number)."""
    if not line.endswith(b"\n"):
        raise ValueError("a torn line")
    record = json.loads(line)
    rows = tuple(ResultRow(**row) for row in record["rows"])
    for row in rows:
        check_row(row)
    unplayed = tuple(
        tuple(BandwidthStep.model_validate(step) for step in steps) for steps in record["unplayed"]
    )
    return ConfigResult(int(record["index"]), rows, unplayed)


def _marked(marker: Path) -> dict[str, object]:
    """What a ``sweep.json`` holds; empty if it holds no mapping (torn, edited)."""
    try:
        found = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
