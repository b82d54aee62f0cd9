"""Whether the real processes of a run fit in this machine's memory, checked before any
starts: every rank builds the whole model on an interpreter of its own, so a run too big
would otherwise be met by the kernel's out-of-memory killer, which may pick any process
of the machine."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

from edgetwin.errors import InputError

GIB = 2**30
MIB = 2**20
_RESIDENT_AFTER_IMPORT = """import {module}
for line in open("/proc/self/status"):
    if line.startswith("VmRSS:"):
        print(int(line.split()[1]) * 1024)
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


@functools.cache
def interpreter_bytes(module: str) -> int:
    """Resident memory of a fresh interpreter that has imported ``module`` (a process's
    share before its model: Python and torch's or ONNX Runtime's libraries), measured by
    starting one; 0 where it cannot be measured (no ``/proc``, the import fails: the run
    itself then says why)."""
    code = _RESIDENT_AFTER_IMPORT.format(module=module)
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
        )
        return int(done.stdout.split()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return 0


def check_weights_fit(weight_bytes: float, processes: int, path: Path | None, module: str) -> None:
    """``InputError`` naming ``model`` if ``processes`` interpreters running ``module``,
    each with the whole model's weights (a lower bound: activations come on top), exceed
    the memory available now."""
    base = interpreter_bytes(module)
    what = (
        f"{processes} processes, each with the whole model's weights "
        f"({weight_bytes / MIB:,.0f} MiB) on an interpreter of {base / MIB:,.0f} MiB,"
    )
    check_fits((weight_bytes + base) * processes, path, "model", what)


def check_fits(need_bytes: float, path: Path | None, field: str, what: str) -> None:
    """``InputError`` naming ``field`` if ``need_bytes`` (of ``what``) exceed the memory
    available now."""
    have = available_bytes()
    if need_bytes > have:
        problem = f"{what} need {need_bytes / GIB:.1f} GiB; {have / GIB:.1f} GiB is available"
        raise InputError(path, field, problem + ": use --mode twin")
