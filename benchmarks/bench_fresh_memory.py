"""Benchmark: what fresh memory costs a process on this machine, alone and five at once.

Run on demand (not part of the test suite):

    .venv/bin/python benchmarks/bench_fresh_memory.py [--mb 180] [--processes 5] [--idle-s 90]

A warm load of a large ONNX stage page-faults its blob into a fresh mapping
(glibc maps buffers above its mmap threshold anew each time: the load model's
mapped term, ``calibration/session_load.py``). On a virtual machine whose free
memory goes back to its host, a first touch of such a page can also wait for the
host to back it, and then costs far more than the guest's own fault. Each round
starts ``--processes`` fresh interpreters at once (and one alone) that each touch
``--mb`` MB of new memory, one write per 4 KiB page, and prints each one's
milliseconds: first after ``--idle-s`` seconds of idling (the host may have taken
the memory back), then at once again (the host still backs it).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

TOUCH = """
import time, numpy as np
start = time.perf_counter()
pages = np.empty({size}, dtype=np.uint8)
pages[::4096] = 1
print(round((time.perf_counter() - start) * 1e3))
"""


def touch_ms(mb: float, processes: int) -> list[int]:
    """Milliseconds each of ``processes`` interpreters, started at once, took to touch
    ``mb`` MB of fresh memory."""
    code = TOUCH.format(size=int(mb * 1e6))
    running = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    return [int(p.communicate()[0]) for p in running]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=180.0, help="cell_a's blob: 180 MB")
    parser.add_argument("--processes", type=int, default=5, help="the emulated phones")
    parser.add_argument("--idle-s", type=float, default=90.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"touching {args.mb:g} MB of fresh memory, ms per process")
    for _ in range(args.rounds):
        for processes in (1, args.processes):
            time.sleep(args.idle_s)
            after_idle = touch_ms(args.mb, processes)
            print(f"after {args.idle_s:g} s idle, {processes} at once: {after_idle}")
            print(f"  at once again, {processes} at once: {touch_ms(args.mb, processes)}")


if __name__ == "__main__":
    main()
