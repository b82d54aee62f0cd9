"""Atomic writes: a file via a temp file in the same folder renamed into place; an output
folder staged beside and swapped in whole."""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from edgetwin.errors import FORCE_OPTION, OUT_OPTION, InputError, raise_if_stop_asked

_MOUNT_ESCAPE = re.compile(rb"\\([0-7]{3})")  # in /proc/self/mountinfo: \040 is a space


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one."""
    write_texts_together({path: text})


def write_texts_together(texts: Mapping[Path, str]) -> None:
    """Write every file of ``texts`` (path -> text), each atomically, and all or none: each
    goes to a temp file beside it first, and only once all are written are they renamed
    into place (a failed write leaves every old file as it was)."""
    for path in texts:
        if output_kind(path) not in (None, "file"):
            raise InputError(path, None, "exists and is not a regular file")
    temps: dict[Path, str] = {}
    try:
        for path, text in texts.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temps[path] = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
            os.chmod(temps[path], 0o644)
        raise_if_stop_asked()  # a stop asked for publishes nothing, even if its interrupt was lost
        for path, tmp in temps.items():
            os.replace(tmp, path)
    except BaseException:
        for tmp in temps.values():
            Path(tmp).unlink(missing_ok=True)
        raise


def why_not_written(path: Path, exc: OSError) -> str:
    """Why ``path`` (or a temporary file beside it) could not be written, in words: a file
    where one of its folders should be, else the system's reason, without the temporary
    file's name."""
    blocked = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    return f"{blocked} is a file, not a folder" if blocked else str(exc.strerror or exc)


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
    out: Path, force: bool, inputs: Iterable[str] = (), in_place: bool = False
) -> None:
    """An InputError unless ``out`` is absent or an empty folder, or ``force`` is given
    (then the caller replaces it whole); any file in it counts, an earlier run's too. A
    folder that cannot be replaced is refused even with ``force``: the current folder or
    one holding it, and one holding any of ``inputs`` (the files the command read); so is
    a mount point, which no folder can be swapped for, unless the command writes
    ``in_place`` (a plan's journal)."""
    found = output_kind(out)
    if found not in (None, "folder"):
        raise InputError(out, None, f"{OUT_OPTION} exists and is not a folder")
    if found == "folder":
        _check_replaceable(out, inputs)
        if not in_place and is_mount_point(out):  # EBUSY at the end, else
            problem = (
                f"{OUT_OPTION} is a mount point, which cannot be swapped for a new folder: "
                "use one in it"
            )
            raise InputError(out, None, problem)
    if force or found is None:
        return
    try:
        empty = next(out.iterdir(), None) is None
    except OSError as exc:
        raise InputError(out, None, f"cannot read the output folder: {exc.strerror}") from None
    if not empty:
        problem = f"{OUT_OPTION} is not empty; pass {FORCE_OPTION} to replace it whole"
        raise InputError(out, None, problem)


def is_mount_point(path: Path) -> bool:
    """Whether ``path`` is a mount point (in this process's mount namespace):
    ``os.path.ismount`` misses a folder of the same file system bound onto it (it compares
    the devices of the folder and of its parent), which ``/proc/self/mountinfo`` lists
    (the fifth field of a line, space, tab, newline and backslash as octal escapes, seen
    from this process's root as ``resolve`` sees the path); where it cannot be read,
    ``os.path.ismount`` alone."""
    here = path.resolve()
    if os.path.ismount(here):
        return True
    try:
        table = Path("/proc/self/mountinfo").read_bytes()
    except OSError:
        return False
    wanted = os.fsencode(here)
    points = (line.split(b" ")[4] for line in table.splitlines() if line.count(b" ") >= 4)
    return any(_MOUNT_ESCAPE.sub(_unescaped, point) == wanted for point in points)


def _unescaped(match: re.Match[bytes]) -> bytes:
    """The byte an octal escape of ``/proc/self/mountinfo`` stands for."""
    return bytes([int(match[1], 8)])


def _check_replaceable(out: Path, inputs: Iterable[str]) -> None:
    here = out.resolve()
    if Path.cwd().resolve().is_relative_to(here):
        raise InputError(out, None, f"{OUT_OPTION} is the current folder or holds it")
    held = next((p for p in inputs if Path(p).resolve().is_relative_to(here)), None)
    if held is not None:
        raise InputError(out, None, f"{OUT_OPTION} holds an input of this command ({held})")


def publish_folder(staging: Path, out: Path, replace: bool = True) -> None:
    """Put the finished folder ``staging`` in place of ``out`` (which goes, whole): ``out``
    is renamed aside, ``staging`` renamed in, the old one removed. Both sit in one parent,
    so each rename is atomic; if the second fails, the old folder is put back.

    Without ``replace``, ``out`` must still be absent or an empty folder (or a link, which
    is replaced, as ``check_out_folder`` allowed): a command that filled it meanwhile
    (two runs started with the same new ``--out``) keeps its output, and this one is an
    InputError. An ``out`` the system will not rename (an immutable folder, another user's
    in a sticky folder) is an InputError too, ``out`` left as it was. After a stop was
    asked for (``stop_asked``) nothing is published: a KeyboardInterrupt."""
    raise_if_stop_asked()
    try:
        _swap_in(staging, out, replace)
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR) and not replace:
            problem = (
                f"{OUT_OPTION} was filled by another command while this one ran; this run's "
                f"output was not kept (pass {FORCE_OPTION} to replace it)"
            )
        else:
            problem = f"cannot replace it: {exc.strerror or exc}; this run's output was not kept"
        raise InputError(out, None, problem) from None


def _swap_in(staging: Path, out: Path, replace: bool) -> None:
    """``publish_folder``'s renames; an OSError leaves ``out`` as it was and nothing aside."""
    if not replace and not out.is_symlink():
        staging.rename(out)  # atomic; refused by the kernel if out holds anything
        return
    if not os.path.lexists(out):
        staging.rename(out)
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{out.name}-old-", dir=out.parent))
    try:
        out.rename(aside / out.name)
    except BaseException:
        aside.rmdir()
        raise
    try:
        staging.rename(out)
    except BaseException:
        (aside / out.name).rename(out)
        aside.rmdir()
        raise
    shutil.rmtree(aside, ignore_errors=True)
