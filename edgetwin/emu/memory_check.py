"""Whether the real processes of a run fit in this machine's memory, checked before any
starts: every rank builds the whole model, so a model too big would otherwise be met by
the kernel's out-of-memory killer, which may pick any process of the machine."""

from __future__ import annotations

import os
from pathlib import Path

from edgetwin.errors import InputError

GIB = 2**30


def available_bytes() -> int:
    """Memory the kernel says can be given without swapping (``MemAvailable``), or the
    installed memory where ``/proc/meminfo`` is not there."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_weights_fit(weight_bytes: float, processes: int, path: Path | None) -> None:
    """``InputError`` naming ``model`` if ``processes`` copies of the weights alone (a
    lower bound: activations come on top) exceed the memory available now."""
    what = f"the weights alone in {processes} processes (each builds the whole model)"
    check_fits(weight_bytes * processes, path, "model", what)


def check_fits(need_bytes: float, path: Path | None, field: str, what: str) -> None:
    """``InputError`` naming ``field`` if ``need_bytes`` (of ``what``) exceed the memory
    available now."""
    have = available_bytes()
    if need_bytes > have:
        problem = f"{what} need {need_bytes / GIB:.1f} GiB; {have / GIB:.1f} GiB is available"
        raise InputError(path, field, problem + ": use --mode twin")
