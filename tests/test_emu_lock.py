"""One emulator run per machine: the lock is seen by other processes and freed when one dies."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from edgetwin.emu.mininet.lock import emulator_busy, emulator_lock

HOLD = """
import sys, time
from pathlib import Path
from edgetwin.emu.mininet.lock import emulator_lock
with emulator_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder(lock: Path, seconds: float) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


def test_a_live_run_is_seen_and_a_killed_one_frees_the_lock(tmp_path: Path) -> None:
    lock = tmp_path / "emu.lock"
    assert emulator_busy(lock) is None
    process = _holder(lock, 60)
    assert emulator_busy(lock) == f"pid {process.pid}"
    process.kill()
    process.wait()
    assert emulator_busy(lock) is None


def test_a_second_run_waits_for_the_first(tmp_path: Path) -> None:
    lock = tmp_path / "emu.lock"
    process = _holder(lock, 1.0)
    start = time.monotonic()
    with emulator_lock(lock):
        waited_s = time.monotonic() - start
    process.wait()
    assert waited_s > 0.8  # the first run held it for 1 s after saying so
    assert emulator_busy(lock) is None
