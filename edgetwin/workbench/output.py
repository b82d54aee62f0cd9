"""Output folders that are published whole or not at all."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

from edgetwin.atomic import check_out_folder, publish_folder, why_not_written
from edgetwin.errors import InputError
from edgetwin.provenance import files_read

Tracker = Callable[[Path], AbstractContextManager[None]]


@contextmanager
def output_folder(
    out: Path, force: bool = False, tracked: Tracker | None = None, inputs: Iterable[str] = ()
) -> Iterator[Path]:
    """A temporary folder beside ``out``; on success it replaces ``out`` whole.

    A non-empty ``out`` is refused unless ``force``, and one that holds the current folder
    or a file read (``inputs``, and what the command records) is refused even then.
    Nothing is half-written: on any error the temporary folder is removed and ``out``
    keeps what it had; without ``force``, a command that filled ``out`` while this one
    ran keeps its output (this one is refused). ``tracked`` (if given) is entered with
    the temporary folder until it is gone.
    """
    check_out_folder(out, force, (*files_read(), *inputs))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
        staging.chmod(0o755)  # mkdtemp's is 0o700: the published folder is readable, as its files
    except OSError as exc:
        problem = f"cannot create the output folder: {why_not_written(out, exc)}"
        raise InputError(out, None, problem) from None
    with tracked(staging) if tracked is not None else nullcontext():
        try:
            yield staging
            publish_folder(staging, out, replace=force)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def output_folder_if(out: Path | None, force: bool) -> AbstractContextManager[Path | None]:
    """``output_folder(out, force)``, or nothing (``None``) without ``out``."""
    return nullcontext() if out is None else output_folder(out, force)


@contextmanager
def scratch_folder(tracked: Tracker | None = None) -> Iterator[Path]:
    """A temporary folder for a run that publishes nothing; removed at the end."""
    with (
        tempfile.TemporaryDirectory(prefix="edgetwin-") as name,
        tracked(Path(name)) if tracked is not None else nullcontext(),
    ):
        yield Path(name)


def removed_if_killed(folder: Path) -> AbstractContextManager[None]:
    """An emulator run's staging folder, removed by ``emu-cleanup`` if the run is killed."""
    from edgetwin.emu.mininet.net import removed_if_killed as emu_removed_if_killed

    return emu_removed_if_killed(folder)
