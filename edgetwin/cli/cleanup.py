"""``edgetwin emu-cleanup``: what a killed local run or a crashed emulator run left."""

from __future__ import annotations

import argparse
from dataclasses import replace

from edgetwin.cli.command import Command
from edgetwin.errors import InputError, counted
from edgetwin.run_folders import LOCAL, remove_leftovers


def add_cleanup_arguments(_parser: argparse.ArgumentParser) -> None:
    """``edgetwin emu-cleanup`` takes none."""


def cleanup_command(_args: argparse.Namespace) -> int:
    """Remove what a killed local run left (its temporary folders), then what a crashed
    emulator run left: its processes, interfaces, bridge, cgroups, temporary folders and the
    staging folder beside its ``--out`` (root's, so as root only)."""
    from edgetwin.emu.mininet.lock import LOCK_PATH, emulator_busy
    from edgetwin.emu.mininet.mn import ROOT_NEEDED, is_root
    from edgetwin.emu.mininet.net import cleanup_leftovers

    local = tuple(remove_leftovers(LOCAL))  # needs no root
    root = is_root()
    owner = emulator_busy() if root else None
    if not root or owner is not None:  # said here: the emulator's part is not done
        print(f"emu-cleanup: {counted(len(local), 'folder')} of killed local runs removed")
    if not root:  # the lock file, the interfaces and the processes are root's
        raise InputError("emu-cleanup", None, f"needs {ROOT_NEEDED}")
    if owner is not None:
        problem = f"an emulator run ({owner}) is live and cleans up after itself; not touching it"
        raise InputError(LOCK_PATH, None, problem)
    left = cleanup_leftovers()
    print(f"emu-cleanup: {replace(left, folders=(*left.folders, *local))}")
    return 0


EMU_CLEANUP = Command(
    "emu-cleanup",
    "remove what killed runs left: local runs' folders; as root, emulator processes, links, "
    "folders",
    "sudo edgetwin emu-cleanup",
    add_cleanup_arguments,
    cleanup_command,
)
