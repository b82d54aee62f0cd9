"""One emulator run per machine: a lock on a file that the kernel releases if the run dies.

Every run builds the same host, bridge and interface names and removes this
package's leftovers first, so two runs at once would tear each other down.
``emulator_lock`` makes a second run wait for the first (saying so once), and
``emulator_busy`` lets ``emu-cleanup`` refuse while a live run holds the lock.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

LOCK_PATH = Path("/run/lock/edgetwin-emu.lock")


@contextmanager
def emulator_lock(path: Path = LOCK_PATH) -> Iterator[None]:
    """Hold the machine's emulator lock; wait (telling stderr whose run) if it is held."""
    with _open(path) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _holder(handle)
            print(f"edgetwin: waiting for another emulator run ({owner}) to finish",
                  file=sys.stderr)  # fmt: skip
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)


def emulator_busy(path: Path = LOCK_PATH) -> str | None:
    """Who holds the lock (``"pid N"``), or None when no emulator run is live."""
    with _open(path) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(handle)
        fcntl.flock(handle, fcntl.LOCK_UN)
        return None


@contextmanager
def _open(path: Path) -> Iterator[TextIO]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="ascii") as handle:
        yield handle


def _holder(handle: TextIO) -> str:
    handle.seek(0)
    text = handle.read().strip()
    return f"pid {text}" if text else "pid unknown"
