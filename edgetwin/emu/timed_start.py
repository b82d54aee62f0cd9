"""When a launch's timed work starts, as its rank 0 tells its launcher: one line, rank 0's
``time.monotonic()`` in seconds, written as its first timed forward (a ViT) or generation
(a decoder) is about to start, its warm-ups done. Every process of a machine, one in a
Mininet host too, reads the same monotonic clock, so the emulator counts a launch's
``network.schedule`` from that instant, as the twin counts from its run's start."""

from __future__ import annotations

import time
from pathlib import Path

FILE = "timed_start.txt"  # in the launch's folder (worker --timed-start)


def announce(path: Path) -> None:
    """Rank 0: the timed work starts now."""
    path.write_text(f"{time.monotonic()!r}\n")


def announced_s(path: Path) -> float | None:
    """The instant rank 0 announced (``time.monotonic()`` s), once its whole line is there."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return float(text) if text.endswith("\n") else None
