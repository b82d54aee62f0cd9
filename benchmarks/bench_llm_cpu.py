"""Benchmark: the real decoder's TTFT and TPOT per strategy on this machine's CPU.

Run on demand (not part of the test suite):

    .venv/bin/python benchmarks/bench_llm_cpu.py [--reps 5] [--batch 1 4] [--layers 2]

GPT-2 small cut to a few layers (width 768, vocabulary 50257, random weights), prompt
64, 16 output tokens, every strategy on 2 local ranks over GLOO loopback (single on
one); every rank gets the same share of the cores. Prints a markdown table: medians of
rank 0's TTFT and TPOT over the reps with their range, bytes sent by all ranks per
part, and how the last rank's output compares with one device's.
"""

from __future__ import annotations

import argparse
import statistics

from edgetwin.decoder_spec import DecoderSpec
from edgetwin.emu.llm.launcher import run_decoder
from edgetwin.emu.llm.records import RankRecord
from edgetwin.emu.llm.runs import DECODER_STRATEGIES
from edgetwin.models.strategies import prism, single
from edgetwin.this_machine import available_cores

PROMPT, OUTPUT, DEVICES = 64, 16, 2
PRISM_SEGMENTS = 8  # per rank: CR = 64 / (8 x 2) = 4


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def row(strategy: str, batch: int, records: list[RankRecord]) -> str:
    reps = records[0].reps
    tpots = [rep.tpot_ms for rep in reps if rep.tpot_ms is not None]
    sent = {part: sum(r.bytes_sent[part] for r in records) / 1e6 for part in ("prefill", "decode")}
    last = records[-1]
    diff = "-" if last.max_abs_diff_vs_single is None else f"{last.max_abs_diff_vs_single:.1e}"
    match = (
        "-" if last.prefix_agreement_vs_single is None else f"{last.prefix_agreement_vs_single:.2f}"
    )
    return (
        f"| {strategy} | {batch} | {spread([rep.ttft_ms for rep in reps])} | {spread(tpots)} "
        f"| {sent['prefill']:.2f} | {sent['decode']:.2f} | {diff} | {match} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args()
    spec = DecoderSpec(preset="gpt2_small", layers=args.layers)
    threads = max(1, available_cores() // DEVICES)
    print(f"gpt2_small x {args.layers} layers, prompt {PROMPT}, {OUTPUT} tokens, "
          f"{threads} thread(s) per rank; median (min-max) of {args.reps}")  # fmt: skip
    print("| strategy | batch | TTFT ms | TPOT ms | MB prefill | MB decode | max diff | prefix |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for batch in args.batch:
        for strategy in DECODER_STRATEGIES:
            records = run_decoder(
                spec,
                strategy,
                1 if strategy == single.NAME else DEVICES,
                PROMPT,
                OUTPUT,
                batch,
                segments=PRISM_SEGMENTS if strategy == prism.NAME else None,
                threads=threads,
                reps=args.reps,
            )
            print(row(strategy, batch, records), flush=True)


if __name__ == "__main__":
    main()
