"""Benchmark: two real ranks computing at once on this machine's cores vs one alone.

Run on demand (not part of the test suite):

    .venv/bin/python benchmarks/bench_colocated_cpu.py [--rounds 5] [--batch 4] [--out rows.csv]

Each rank is a real torch process running the ViT-B/16 encoder blocks over one
2-way partition (99 tokens), the compute of a Voltage or Prism rank. For each
torch thread count per rank (1 and the machine's cores), a round times one rank
alone, then two ranks started together (a barrier), each doing the same forwards;
rounds alternate so that other load on the machine spreads over both. Other work on a
shared machine competes for the same cores: before each round the benchmark samples how
many other threads are runnable (``procs_running`` of /proc/stat, less itself). The twin's
prediction comes from its shared host (``sim.host.Host``: ``compute_slots`` = cores /
threads, ``other_load`` = those threads / threads), run in SimPy. Prints, per thread
count, the measured and the twin's together / alone ratio (median and range over rounds).
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import statistics
import time
from collections.abc import Generator
from multiprocessing.synchronize import Barrier
from pathlib import Path

import simpy

from edgetwin.emu.vit.launcher import available_cores
from edgetwin.model_spec import ModelSpec
from edgetwin.scenario import HostSpec
from edgetwin.sim.host import Host

PARTITION_TOKENS = 99  # one half of ViT-B/16's 197 tokens
BLOCKS = 2


def _rank(threads: int, batch: int, forwards: int, barrier: Barrier | None, out: mp.Queue) -> None:  # type: ignore[type-arg]
    import torch

    from edgetwin.emu.vit.model import build_vit

    torch.set_num_threads(threads)
    model = build_vit(ModelSpec(preset="vit_b16", blocks=BLOCKS))
    hidden = torch.randn(batch, PARTITION_TOKENS, model.spec.width)
    with torch.inference_mode():
        for block in model.encoder_blocks():  # warm-up
            block(hidden)
        if barrier is not None:
            barrier.wait()
        times = []
        for _ in range(forwards):
            start = time.perf_counter()
            rows = hidden
            for block in model.encoder_blocks():
                rows = block(rows)
            times.append((time.perf_counter() - start) * 1e3)
    out.put(statistics.median(times))


def measure_ms(ranks: int, threads: int, batch: int, forwards: int) -> float:
    """Median forward time of each of ``ranks`` processes computing at once (mean over them)."""
    context = mp.get_context("spawn")
    queue = context.Queue()
    barrier = context.Barrier(ranks) if ranks > 1 else None
    processes = [
        context.Process(target=_rank, args=(threads, batch, forwards, barrier, queue))
        for _ in range(ranks)
    ]
    for process in processes:
        process.start()
    results = [queue.get(timeout=600) for _ in processes]
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
    host = Host(env, HostSpec(name="cpu", compute_slots=slots, other_load=other_load))
    finished: list[float] = []

    def rank() -> Generator[simpy.Event, object, None]:
        for _ in range(forwards):
            yield host.accelerator.run(1.0)
        finished.append(env.now)

    for _ in range(ranks):
        env.process(rank())
    env.run()
    return statistics.mean(finished) / forwards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--forwards", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    cores = available_cores()
    rows = []
    for threads in sorted({1, cores}):
        for round_index in range(args.rounds):
            others = other_threads()
            alone = measure_ms(1, threads, args.batch, args.forwards)
            together = measure_ms(2, threads, args.batch, args.forwards)
            slots, load = cores / threads, others / threads
            twin = alone * twin_ms(2, slots, load, args.forwards) / twin_ms(1, slots, load, 1)
            rows.append((threads, round_index, others, alone, together, twin))
            print(
                f"threads {threads} round {round_index}: {others:.1f} other threads, alone "
                f"{alone:.1f} ms, two at once {together:.1f} ms, twin {twin:.1f} ms",
                flush=True,
            )
    print(f"\n{cores} cores, batch {args.batch}, {BLOCKS} blocks over {PARTITION_TOKENS} tokens")
    print("| threads per rank | other threads | alone ms | measured two / alone | twin |")
    print("| --- | --- | --- | --- | --- |")
    for threads in sorted({1, cores}):
        mine = [r for r in rows if r[0] == threads]
        columns = (
            _spread([r[2] for r in mine], 1),
            _spread([r[3] for r in mine], 0),
            _spread([r[4] / r[3] for r in mine], 2),
            _spread([r[5] / r[3] for r in mine], 2),
        )
        print(f"| {threads} | " + " | ".join(columns) + " |")
    if args.out is not None:
        with args.out.open("w", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            columns = ("threads", "round", "other_threads", "alone_ms", "together_ms", "twin_ms")
            writer.writerow(columns)
            writer.writerows(rows)


def _spread(values: list[float], digits: int) -> str:
    """Median (min-max)."""
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"


if __name__ == "__main__":
    main()
