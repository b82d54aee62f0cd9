"""Whether the real processes of a run fit in this machine's memory, checked before any
starts: every rank builds the whole model on an interpreter of its own, so a run too big
would otherwise be met by the kernel's out-of-memory killer, which may pick any process
of the machine."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from edgetwin.errors import MODE_TWIN, InputError

GIB = 2**30
MIB = 2**20
_RESIDENT_AFTER_IMPORT = """import {module}
kib = dict(line.split()[:2] for line in open("/proc/self/status") if line.startswith("Rss"))
print(int(kib["RssAnon:"]) + int(kib["RssShmem:"]), int(kib["RssFile:"]))
"""


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


@dataclass(frozen=True)
class Interpreter:
    """What a fresh interpreter that has imported a module holds before its model: memory
    of its own (``own_bytes``: anonymous and shared-memory pages: Python's objects, the
    libraries' heaps) and the files it maps (``files_bytes``: the libraries' code, one
    copy shared by every process that maps them)."""

    own_bytes: int
    files_bytes: int

    def bytes_for(self, processes: int) -> int:
        """What ``processes`` such interpreters hold together."""
        return processes * self.own_bytes + self.files_bytes if processes else 0

    def described(self) -> str:
        """`` on interpreters of 150 MiB each and 81 MiB of shared libraries``, or nothing
        where it was not measured."""
        if not self.own_bytes:
            return ""
        return (
            f" on interpreters of {self.own_bytes / MIB:,.0f} MiB each and "
            f"{self.files_bytes / MIB:,.0f} MiB of shared libraries"
        )


@functools.cache
def interpreter(module: str) -> Interpreter:
    """The memory of a fresh interpreter that has imported ``module`` (torch's or ONNX
    Runtime's libraries with it), measured by starting one; 0 and 0 where it cannot be
    measured (no ``/proc``, the import fails: the run itself then says why)."""
    code = _RESIDENT_AFTER_IMPORT.format(module=module)
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
        )
        own_kib, files_kib = (int(field) for field in done.stdout.split()[-2:])
    except (OSError, subprocess.SubprocessError, ValueError):
        return Interpreter(0, 0)
    return Interpreter(own_kib * 1024, files_kib * 1024)


@dataclass(frozen=True)
class BatchMemory:
    """What one process holds at once for a sweep's largest batch, a lower bound of its
    activations (``what``: of what it counts, e.g. ``the input images and one block's
    tokens``); ``field`` names that sweep's batch (``sweeps.0.batch``)."""

    field: str
    batch: int
    activation_bytes: float
    what: str


def check_weights_fit(
    weight_bytes: float,
    processes: int,
    path: Path | None,
    module: str,
    batch: BatchMemory | None = None,
) -> None:
    """``InputError`` naming ``model`` if ``processes`` interpreters running ``module``,
    each with the whole model's weights, exceed the memory available now; naming
    ``batch.field`` if they fit but not with one process's activations at that batch on
    top (a lower bound: the run holds more)."""
    base = interpreter(module)
    what = (
        f"{processes} processes, each with the whole model's weights "
        f"({weight_bytes / MIB:,.0f} MiB){base.described()},"
    )
    weights_need = weight_bytes * processes + base.bytes_for(processes)
    check_fits(weights_need, path, "model", what)
    if batch is not None:
        what = (
            f"batch {batch.batch} ({batch.what} in one process: at least "
            f"{batch.activation_bytes / MIB:,.0f} MiB) and {processes} processes' weights "
            f"and interpreters ({weights_need / MIB:,.0f} MiB)"
        )
        check_fits(weights_need + batch.activation_bytes, path, batch.field, what)


def check_fits(need_bytes: float, path: Path | None, field: str, what: str) -> None:
    """``InputError`` naming ``field`` if ``need_bytes`` (of ``what``) exceed the memory
    available now."""
    have = available_bytes()
    if need_bytes > have:
        problem = f"{what} need {need_bytes / GIB:.1f} GiB; {have / GIB:.1f} GiB is available"
        raise InputError(path, field, f"{problem}: use {MODE_TWIN}")
