"""Provenance of an output folder: ``provenance.json`` says which edgetwin (version, git
commit, dirty tree), which command, which seed and which input files (SHA-256) made it.

The loading step's readers call ``note_read`` for each file they read; a command records
them with ``recording_reads`` and hands the mapping to ``write_provenance``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from edgetwin.atomic import write_text_atomic
from edgetwin.errors import InputError
from edgetwin.output_folder import PROVENANCE_FILE

FIELDS = (
    *("edgetwin_version", "git_commit", "git_dirty", "command", "seed", "inputs"),
    "created_utc",
)
PACKAGE = Path(__file__).resolve().parent  # edgetwin/
SOURCE_TREE = PACKAGE.parent  # the folder that holds edgetwin/
GIT_TIMEOUT_S = 10

_reads: ContextVar[dict[str, str] | None] = ContextVar("edgetwin_reads", default=None)


def edgetwin_version() -> str:
    """The installed package's version ("unknown" when run from a tree not installed)."""
    try:
        return version("edgetwin")
    except PackageNotFoundError:
        return "unknown"


@cache
def code_digest() -> str:
    """``modules_digest`` of edgetwin itself: the code that makes rows (edited since,
    committed or not, it is another digest)."""
    return modules_digest(PACKAGE)


def modules_digest(package: Path) -> str:
    """SHA-256 over the path and bytes of every Python module under ``package``."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(f"{path.relative_to(package).as_posix()}\0".encode())
        digest.update(sha256_file(path).encode())
    return digest.hexdigest()


def sha256_file(path: Path) -> str:
    """The SHA-256 of a file's bytes, in hex."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextmanager
def recording_reads() -> Iterator[dict[str, str]]:
    """Within the block, every ``note_read`` adds {path: sha256} to the yielded mapping (and
    to an enclosing block's: the command that calls the API read them too)."""
    reads: dict[str, str] = {}
    outer = _reads.get()
    token = _reads.set(reads)
    try:
        yield reads
    finally:
        _reads.reset(token)
        if outer is not None:
            outer.update(reads)


def files_read() -> tuple[str, ...]:
    """The files read so far within ``recording_reads`` (none outside it)."""
    return tuple(_reads.get() or ())


def note_read(path: Path, data: bytes) -> None:
    """Record ``path`` (as the reader opened it) with the SHA-256 of ``data``, the bytes read
    from it (``sha256_file``'s, without opening it again), if a command records."""
    reads = _reads.get()
    if reads is not None:  # data/x, not scenarios/../data/x
        reads[os.path.normpath(path)] = hashlib.sha256(data).hexdigest()


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(SOURCE_TREE), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def source_commit() -> tuple[str | None, bool | None]:
    """``git rev-parse HEAD`` of the tree edgetwin runs from, and whether that tree has
    changes (tracked or untracked, not ignored); (None, None) when it is no git checkout
    of its own (an installed package inside another repository counts as none)."""
    top = _git("rev-parse", "--show-toplevel")
    if top is None or Path(top.strip()).resolve() != SOURCE_TREE:
        return None, None
    head = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain")
    if head is None:
        return None, None
    return head.strip(), None if status is None else bool(status.strip())


def write_provenance(
    folder: Path, *, command: Sequence[str], seed: int | None, inputs: Mapping[str, str]
) -> dict[str, Any]:
    """Write ``folder/provenance.json``: version, commit, command, seed, input hashes; and
    return that record. A file in ``folder`` is the command's own output, not an input (a
    plan's answer reads its table, a machine fit the spec it wrote): it is left out."""
    own = folder.resolve()
    given = {p: digest for p, digest in inputs.items() if not Path(p).resolve().is_relative_to(own)}
    commit, dirty = source_commit()
    record = {
        "edgetwin_version": edgetwin_version(),
        "git_commit": commit,
        "git_dirty": dirty,
        "command": [str(part) for part in command],
        "seed": seed,
        "inputs": dict(sorted(given.items())),
        "created_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    write_provenance_record(folder, record)
    return record


def write_provenance_record(folder: Path, record: Mapping[str, Any]) -> Path:
    """Write ``record`` (``write_provenance``'s, or one read back) as
    ``folder/provenance.json``."""
    path = folder / PROVENANCE_FILE
    write_text_atomic(path, json.dumps(record, indent=2) + "\n")
    return path


def read_provenance(folder: str | Path) -> dict[str, Any] | None:
    """``folder/provenance.json`` as a mapping; None if the folder has none (written by an
    older edgetwin); an InputError if it is not such a record, or ``folder`` no folder."""
    if not Path(folder).is_dir():
        raise InputError(Path(folder), None, "not a folder")
    path = Path(folder) / PROVENANCE_FILE
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(path, None, f"cannot read: {exc}") from None
    if not isinstance(record, dict) or set(record) != set(FIELDS):
        raise InputError(path, None, f"not a provenance record (fields: {', '.join(FIELDS)})")
    return record
