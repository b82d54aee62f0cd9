"""Output folders that are published whole or not at all."""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from pathlib import Path

from edgetwin import run_folders
from edgetwin.atomic import publish_folder, staged_folder
from edgetwin.errors import InputError
from edgetwin.output_folder import check_out_folder, why_not_written
from edgetwin.provenance import files_read
from edgetwin.run_folders import Kind

Tracker = Callable[[Path], AbstractContextManager[None]]


@contextmanager
def output_folder(
    out: Path,
    force: bool = False,
    tracked: Tracker | None = None,
    inputs: Iterable[str] = (),
    also_ours: Iterable[str] = (),
) -> Iterator[Path]:
    """A temporary folder beside ``out``; on success it replaces ``out`` whole.

    A non-empty ``out`` is refused unless ``force``, and one that holds the current folder
    or a file read (``inputs``, and what the command records), or is no edgetwin output
    (no provenance record, nor any of ``also_ours``) is refused even then.
    Nothing is half-written: on any error the temporary folder is removed and ``out``
    keeps what it had; without ``force``, a command that filled ``out`` while this one
    ran keeps its output (this one is refused). The temporary folder is in a staging
    folder (``atomic.staged_folder``), which the next command writing beside ``out``
    removes if this one is killed; ``tracked`` (if given) is entered with that staging
    folder until it is gone.
    """
    check_out_folder(out, force, (*files_read(), *inputs), also_ours=also_ours)
    with ExitStack() as stack:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            staging = stack.enter_context(staged_folder(out))
        except OSError as exc:
            problem = f"cannot create the output folder: {why_not_written(out, exc)}"
            raise InputError(out, None, problem) from None
        with tracked(staging.parent) if tracked is not None else nullcontext():
            yield staging
            publish_folder(staging, out, replace=force)


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


def removed_if_killed(kind: Kind) -> Tracker:
    """What keeps a ``kind`` run's staging (or scratch) folder named in a run folder while it
    writes, so that if the run is killed ``emu-cleanup`` removes it (and a local run's, the
    next local run), wherever the next command writes."""
    return functools.partial(run_folders.removed_if_killed, kind)
