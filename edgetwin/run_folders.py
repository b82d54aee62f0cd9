"""Temporary folders named after the run that owns them, so that what a run killed outright
(SIGKILL) leaves in the system's temporary folder is recognised as such and removed later.

A run folder is ``edgetwin-<kind>-<pid>.<start>-<purpose>-<random>``: the owner's pid and
start time (clock ticks since boot; pids are reused, often within minutes). ``EMU``'s are
the emulator's (removed under its lock, as root: ``emu/mininet/net.py``), ``LOCAL``'s those
of the real code on loopback (removed by the next local run and ``emu-cleanup``). A run
folder may also name a folder this run made elsewhere (``removed_if_killed``).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

Kind = Literal["emu", "local"]
EMU: Kind = "emu"
LOCAL: Kind = "local"
_NAME = re.compile(r"^edgetwin-[a-z]+-(\d+)\.(\d+)-")  # the owner's pid and start time
_ELSEWHERE = "folder"  # in a run folder made by removed_if_killed: the path of the folder


def run_folder(kind: Kind, purpose: str) -> tempfile.TemporaryDirectory[str]:
    """A temporary folder of this run, removed on exit; its name carries this process's
    pid and start time, so that it is a leftover (``leftover_folders``) if this run is
    killed first."""
    owner = f"{os.getpid()}.{start_ticks(os.getpid())}"
    return tempfile.TemporaryDirectory(prefix=f"edgetwin-{kind}-{owner}-{purpose}-")


def local_folder(purpose: str, within: Path | None) -> tempfile.TemporaryDirectory[str]:
    """A temporary folder ``<purpose>-<random>`` in ``within`` (a folder of this run that is
    a run folder or in one), or without it a ``LOCAL`` run folder of ``purpose``."""
    if within is not None:
        return tempfile.TemporaryDirectory(prefix=f"{purpose}-", dir=within)
    return run_folder(LOCAL, purpose)


@contextmanager
def removed_if_killed(kind: Kind, folder: Path) -> Iterator[None]:
    """While inside, ``folder`` (made by this run outside the temporary folder) is a
    leftover if this run is killed: a run folder names it."""
    with run_folder(kind, "elsewhere") as record:
        (Path(record) / _ELSEWHERE).write_text(str(folder.resolve()))
        yield


def leftover_folders(kind: Kind) -> list[Path]:
    """``kind``'s run folders of this user whose run is gone (no process with their pid and
    start time), each after the folder it names (``removed_if_killed``) if that is still a
    folder of this user. Anyone may make a folder of that name in the temporary folder: one
    of another user was followed, so a record planted there made root's ``emu-cleanup`` (or
    a user's next local run) delete whatever folder it named."""
    found = []
    for entry in sorted(Path(tempfile.gettempdir()).glob(f"edgetwin-{kind}-*")):
        match = _NAME.match(entry.name)
        if match and _own_folder(entry) and start_ticks(int(match.group(1))) != match.group(2):
            found += [*_named_folder(entry), entry]
    return found


def _own_folder(path: Path) -> bool:
    """A folder (not a link to one) of this process's user."""
    try:
        status = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(status.st_mode) and status.st_uid == os.geteuid()


def remove_leftovers(kind: Kind) -> list[Path]:
    """Remove ``leftover_folders(kind)``, leaving those it cannot delete (another user's);
    the ones removed."""
    removed = []
    for folder in leftover_folders(kind):
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
    return removed


def _named_folder(record: Path) -> list[Path]:
    """The folder a ``removed_if_killed`` record names, if it is a folder of this user."""
    try:
        named = Path((record / _ELSEWHERE).read_text())
    except OSError:
        return []
    return [named] if named.is_absolute() and _own_folder(named) else []


def start_ticks(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, /proc/PID/stat), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22; the name before ")" may hold spaces
