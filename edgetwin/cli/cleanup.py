"""``edgetwin emu-cleanup``: what a killed local run or a crashed emulator run left."""

from __future__ import annotations

import argparse

from edgetwin.cli.command import Command
from edgetwin.number_text import counted
from edgetwin.workbench.cleaning import EmulatorNotCleaned, emu_cleanup


def add_cleanup_arguments(_parser: argparse.ArgumentParser) -> None:
    """``edgetwin emu-cleanup`` takes none."""


def cleanup_command(_args: argparse.Namespace) -> int:
    """``edgetwin.emu_cleanup``, saying what it removed (exit 2 where the emulator's part
    needs root or ``ip``, or a live emulator run holds it, the local runs' folders removed)."""
    try:
        left = emu_cleanup()
    except EmulatorNotCleaned as exc:  # said here: the emulator's part is not done
        removed = counted(len(exc.local_folders), "folder")
        print(f"emu-cleanup: {removed} of killed local runs removed")
        raise
    print(f"emu-cleanup: {left}")
    return 0


EMU_CLEANUP = Command(
    "emu-cleanup",
    "remove what killed runs left: local runs' folders; as root, emulator processes, links, "
    "folders",
    "sudo edgetwin emu-cleanup",
    add_cleanup_arguments,
    cleanup_command,
)
