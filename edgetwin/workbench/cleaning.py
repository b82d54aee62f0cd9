"""What a killed local run or a crashed emulator run left, removed (``edgetwin emu-cleanup``
is a thin layer over ``emu_cleanup``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from edgetwin.emu.mininet.lock import LOCK_PATH, emulator_busy
from edgetwin.emu.mininet.mn import IP, IP_HINT, ROOT_NEEDED, is_root, missing_tools
from edgetwin.emu.mininet.net import Leftovers, cleanup_leftovers
from edgetwin.errors import InputError
from edgetwin.run_folders import LOCAL, remove_leftovers


class EmulatorNotCleaned(InputError):
    """``emu_cleanup`` removed what killed local runs left (``local_folders``), but not what
    an emulator run left: that needs root and ``ip``, or a live emulator run cleans up after
    itself."""

    def __init__(
        self, path: Path | str | None, problem: str, local_folders: tuple[Path, ...]
    ) -> None:
        self.local_folders = local_folders
        super().__init__(path, None, problem)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles with its fields, the folders too."""
        return (type(self), (self.path, self.problem, self.local_folders))


def emu_cleanup() -> Leftovers:
    """Remove what killed local runs left (their temporary folders, and staging folders
    beside an output folder; no root needed), then what a crashed emulator run left: its
    processes, interfaces, bridge, cgroups, temporary folders and the staging folder beside
    its ``out`` (root's, so as root only, with iproute2's ``ip``: ``EmulatorNotCleaned``
    otherwise, and while an emulator run is live). Returns what was removed, the local
    runs' folders among the folders."""
    local = tuple(remove_leftovers(LOCAL))  # needs no root
    needs = [] if is_root() else [ROOT_NEEDED]  # the lock, interfaces and processes are root's
    needs += [f"the program {tool} ({IP_HINT})" for tool in missing_tools((IP,))]
    if needs:
        raise EmulatorNotCleaned("emu-cleanup", "needs " + "; ".join(needs), local)
    owner = emulator_busy()
    if owner is not None:
        problem = f"an emulator run ({owner}) is live and cleans up after itself; not touching it"
        raise EmulatorNotCleaned(LOCK_PATH, problem, local)
    left = cleanup_leftovers()
    return replace(left, folders=(*left.folders, *local))
