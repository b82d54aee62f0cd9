"""Benchmark: two real ranks computing at once on one device vs one rank alone.

Run on demand (not part of the test suite):

    .venv/bin/python benchmarks/bench_colocated.py [--rounds 8] [--batch 4] [--out rows.csv]
    python benchmarks/bench_colocated.py --device cuda --blocks 12 --batch 1 2 4 8 16 32

Each rank is a real torch process running ViT-B/16 encoder blocks over one 2-way
partition (99 tokens), the compute of a Voltage or Prism rank. A round times one
rank alone, then two ranks started together (a barrier), each doing the same
forwards; rounds alternate so that other load spreads over both. On a CPU each
thread count per rank (1 and the machine's cores) is a setting of its own, and
since other work on a shared machine competes for the same cores, the benchmark
samples before each round how many other threads are runnable (``procs_running``
of /proc/stat, less itself). On a GPU (``--device cuda``: two processes time-sliced,
no MPS) each forward is timed between ``torch.cuda.synchronize`` calls. The twin's
prediction comes from its shared host (``sim.host.Host``: ``compute_slots`` = cores
/ threads on a CPU, 1 on a GPU; ``other_load`` = the other threads / threads), run in
SimPy. Prints, per setting, the measured and the twin's together / alone ratio
(median and range over rounds).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import multiprocessing as mp
import statistics
import time
from collections.abc import Generator
from dataclasses import astuple, dataclass, fields
from multiprocessing.synchronize import Barrier
from pathlib import Path

import simpy

from edgetwin.device_spec import HostSpec
from edgetwin.model_spec import ModelSpec
from edgetwin.sim.host import Host
from edgetwin.this_machine import available_cores

PARTITION_TOKENS = 99  # one half of ViT-B/16's 197 tokens
FORWARDS_TWIN = 5  # pieces per rank in the twin's run (the ratio does not depend on it)


def _rank(
    device: str,
    threads: int,
    shape: tuple[int, int],
    forwards: int,
    barrier: Barrier | None,
    out: mp.Queue,  # type: ignore[type-arg]
) -> None:
    import torch

    from edgetwin.emu.vit.model import build_vit

    batch, blocks = shape
    torch.set_num_threads(threads)
    model = build_vit(ModelSpec(preset="vit_b16", blocks=blocks), device=device)
    hidden = torch.randn(batch, PARTITION_TOKENS, model.spec.width, device=device)

    def forward() -> None:
        rows = hidden
        for block in model.encoder_blocks():
            rows = block(rows)
        if device == "cuda":
            torch.cuda.synchronize()

    with torch.inference_mode():
        forward()  # warm-up
        if barrier is not None:
            barrier.wait()
        times = []
        for _ in range(forwards):
            start = time.perf_counter()
            forward()
            times.append((time.perf_counter() - start) * 1e3)
    out.put(statistics.median(times))


def measure_ms(
    ranks: int, device: str, threads: int, shape: tuple[int, int], forwards: int
) -> float:
    """Median forward time of each of ``ranks`` processes computing at once (mean over them)."""
    context = mp.get_context("spawn")
    queue = context.Queue()
    barrier = context.Barrier(ranks) if ranks > 1 else None
    processes = [
        context.Process(target=_rank, args=(device, threads, shape, forwards, barrier, queue))
        for _ in range(ranks)
    ]
    for process in processes:
        process.start()
    results: list[float] = [queue.get(timeout=600) for _ in processes]
    for process in processes:
        process.join()
    return statistics.mean(results)


def other_threads(samples: int = 10, every_s: float = 0.05) -> float:
    """Mean number of runnable threads on the machine besides this process's."""
    counts = []
    for _ in range(samples):
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("procs_running"):
                counts.append(max(0, int(line.split()[1]) - 1))
        time.sleep(every_s)
    return statistics.mean(counts)


def twin_ms(ranks: int, slots: float, other_load: float, forwards: int) -> float:
    """The twin's time per piece of 1 ms alone-work when ``ranks`` ranks do ``forwards``
    pieces each at once on one shared host (mean over the ranks)."""
    env = simpy.Environment()
    host = Host(env, HostSpec(name="host", compute_slots=slots, other_load=other_load))
    finished: list[float] = []

    def rank() -> Generator[simpy.Event, object, None]:
        for _ in range(forwards):
            yield host.accelerator.run(1.0)
        finished.append(env.now)

    for _ in range(ranks):
        env.process(rank())
    env.run()
    return statistics.mean(finished) / forwards


@dataclass(frozen=True)
class Round:
    """One round of one setting: the measured times and the twin's for two at once."""

    device: str
    threads: int
    batch: int
    index: int
    other_threads: float
    alone_ms: float
    together_ms: float
    twin_ms: float


def twin_together_ms(device: str, threads: int, others: float, alone_ms: float) -> float:
    """The twin's time of two ranks at once, from the alone time and the setting."""
    slots = 1.0 if device == "cuda" else available_cores() / threads
    load = 0.0 if device == "cuda" else others / threads
    return alone_ms * twin_ms(2, slots, load, FORWARDS_TWIN) / twin_ms(1, slots, load, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--batch", type=int, nargs="+", default=[4])
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--forwards", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    thread_counts = sorted({1, available_cores()}) if args.device == "cpu" else [1]
    rounds: list[Round] = []
    for batch, threads in itertools.product(args.batch, thread_counts):
        for index in range(args.rounds):
            others = other_threads()
            shape = (batch, args.blocks)
            alone = measure_ms(1, args.device, threads, shape, args.forwards)
            together = measure_ms(2, args.device, threads, shape, args.forwards)
            twin = twin_together_ms(args.device, threads, others, alone)
            rounds.append(Round(args.device, threads, batch, index, others, alone, together, twin))
            print(
                f"batch {batch} threads {threads} round {index}: {others:.1f} other threads, "
                f"alone {alone:.1f} ms, two at once {together:.1f} ms, twin {twin:.1f} ms",
                flush=True,
            )
    cores = available_cores()
    print(f"\n{args.device}, {cores} cores, {args.blocks} blocks over {PARTITION_TOKENS} tokens")
    print("| batch | threads per rank | other threads | alone ms | measured two / alone | twin |")
    print("| --- | --- | --- | --- | --- | --- |")
    for batch, threads in itertools.product(args.batch, thread_counts):
        mine = [r for r in rounds if r.threads == threads and r.batch == batch]
        columns = (
            _spread([r.other_threads for r in mine], 1),
            _spread([r.alone_ms for r in mine], 0),
            _spread([r.together_ms / r.alone_ms for r in mine], 2),
            _spread([r.twin_ms / r.alone_ms for r in mine], 2),
        )
        print(f"| {batch} | {threads} | " + " | ".join(columns) + " |")
    if args.out is not None:
        with args.out.open("w", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(field.name for field in fields(Round))
            writer.writerows(astuple(r) for r in rounds)


def _spread(values: list[float], digits: int) -> str:
    """Median (min-max)."""
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"


if __name__ == "__main__":
    main()
