"""The mount points of this process's mount namespace: a folder bound onto another of the
same file system counts, which ``os.path.ismount`` misses."""

from __future__ import annotations

import os
import re
from pathlib import Path

_MOUNT_ESCAPE = re.compile(rb"\\([0-7]{3})")  # in /proc/self/mountinfo: \040 is a space


def is_mount_point(path: Path) -> bool:
    """Whether ``path`` is a mount point (in this process's mount namespace):
    ``os.path.ismount`` misses a folder of the same file system bound onto it (it compares
    the devices of the folder and of its parent), which ``mount_points`` lists."""
    here = path.resolve()
    return os.path.ismount(here) or here in mount_points()


def mount_points() -> list[Path]:
    """The mount points of this process's mount namespace, as ``/proc/self/mountinfo``
    lists them (the fifth field of a line, space, tab, newline and backslash as octal
    escapes), seen from this process's root as ``resolve`` sees a path; none where it
    cannot be read."""
    try:
        table = Path("/proc/self/mountinfo").read_bytes()
    except OSError:
        return []
    fields = (line.split(b" ") for line in table.splitlines())
    return [Path(os.fsdecode(_MOUNT_ESCAPE.sub(_unescaped, f[4]))) for f in fields if len(f) > 4]


def _unescaped(match: re.Match[bytes]) -> bytes:
    """The byte an octal escape of ``/proc/self/mountinfo`` stands for."""
    return bytes([int(match[1], 8)])
