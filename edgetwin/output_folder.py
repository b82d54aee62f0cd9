"""What may be an output: what is at a path, why it could not be written, and the checks on
an output folder (``--out``) before a command replaces it whole."""

from __future__ import annotations

import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from edgetwin.errors import FORCE_OPTION, OUT_OPTION, InputError
from edgetwin.mount_points import is_mount_point, mount_points

# the record every command writes into its output folder (edgetwin/provenance.py): what
# marks a folder as an edgetwin output, which --force may replace
PROVENANCE_FILE = "provenance.json"


def why_not_written(path: Path, exc: OSError) -> str:
    """Why ``path`` (or a temporary file beside it) could not be written, in words: a file
    where one of its folders should be, else the system's reason, without the temporary
    file's name."""
    blocked = blocking_file(path)
    return f"{blocked} is a file, not a folder" if blocked else str(exc.strerror or exc)


def blocking_file(path: Path) -> Path | None:
    """A file where one of ``path``'s folders should be (nothing can be written there)."""
    return next((p for p in path.parents if p.exists() and not p.is_dir()), None)


def output_kind(path: Path) -> Literal["folder", "file", "other"] | None:
    """What is at an output ``path``: a folder, a regular file, something else, or None if
    nothing is there (a file where one of its folders should be counts: creating it says
    so); a path that cannot even be looked up (a name too long, a NUL byte) is an
    InputError."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError) as exc:
        problem = getattr(exc, "strerror", None) or str(exc)
        raise InputError(path, None, f"cannot be an output: {problem}") from None
    if stat.S_ISDIR(mode):
        return "folder"
    return "file" if stat.S_ISREG(mode) else "other"


def check_out_folder(
    out: Path,
    force: bool,
    inputs: Iterable[str] = (),
    in_place: bool = False,
    also_ours: Iterable[str] = (),
) -> None:
    """An InputError unless ``out`` is absent or an empty folder, or ``force`` is given
    (then the caller replaces it whole); any file in it counts, an earlier run's too. A
    folder that cannot be replaced is refused even with ``force``: the current folder or
    one holding it, and one holding any of ``inputs`` (the files the command read); so is
    a mount point, which no folder can be swapped for, and one holding a mount point,
    whose files the removal of the replaced folder would delete, unless the command writes
    ``in_place`` (a plan's journal); and a folder that is no edgetwin output (none of
    ``PROVENANCE_FILE`` and ``also_ours`` in it, say ``--out ~/paper --force``), whose
    files ``force`` would delete."""
    found = output_kind(out)
    if found not in (None, "folder"):
        raise InputError(out, None, f"{OUT_OPTION} exists and is not a folder")
    if found == "folder":
        _check_replaceable(out, inputs)
        if not in_place:
            _check_no_mount(out)
    if out.name == "..":  # its parent: refused only when it was to be replaced, after the work
        raise InputError(out, None, f"{OUT_OPTION} ends in '..': name the folder itself")
    if found is None:
        return
    try:
        first = next(out.iterdir(), None)
    except OSError as exc:
        raise InputError(out, None, f"cannot read the output folder: {exc.strerror}") from None
    if first is None:
        return
    if not force:
        problem = f"{OUT_OPTION} is not empty; pass {FORCE_OPTION} to replace it whole"
        raise InputError(out, None, problem)
    if not any((out / name).exists() for name in (PROVENANCE_FILE, *also_ours)):
        problem = (
            f"{OUT_OPTION} is no edgetwin output (it holds {first.name!r} and no "
            f"{PROVENANCE_FILE}): {FORCE_OPTION} replaces only one; give a new folder"
        )
        raise InputError(out, None, problem)


def _check_no_mount(out: Path) -> None:
    """An InputError if the folder ``out`` is a mount point (its rename at the end would be
    EBUSY) or holds one (``shutil.rmtree`` of the replaced folder would go into it)."""
    if is_mount_point(out):
        problem = (
            f"{OUT_OPTION} is a mount point, which cannot be swapped for a new folder: "
            "use one in it"
        )
        raise InputError(out, None, problem)
    inside = next((p for p in mount_points() if p.is_relative_to(out.resolve())), None)
    if inside is not None:
        problem = (
            f"{OUT_OPTION} holds a mount point ({inside}), whose files replacing it would "
            f"delete: unmount it or use another {OUT_OPTION}"
        )
        raise InputError(out, None, problem)


def _check_replaceable(out: Path, inputs: Iterable[str]) -> None:
    here = out.resolve()
    if Path.cwd().resolve().is_relative_to(here):
        raise InputError(out, None, f"{OUT_OPTION} is the current folder or holds it")
    held = next((p for p in inputs if Path(p).resolve().is_relative_to(here)), None)
    if held is not None:
        raise InputError(out, None, f"{OUT_OPTION} holds an input of this command ({held})")
