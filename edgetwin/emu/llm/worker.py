"""One rank of a real decoder run as a process; on loopback (see ``launcher``), in a
Mininet host or on a real board.

    python -m edgetwin.emu.llm.worker --rank R --world P --master-addr A --master-port N \\
        --strategy voltage --model '{"preset": "gpt2_small", "layers": 2}' \\
        --prompt-tokens 64 --output-tokens 16 [--iface eth0] [--result rank.json]

Every rank builds the same weights (seeded, or ``--weights``) and prompt (seeded random
token ids) and keeps what its strategy needs. Each of ``--warmup`` untimed and ``--reps``
timed generations starts after a barrier. The last rank then compares its logits and
tokens with the whole model generating in its own process, up to their first different
token (``compare_generations``). With ``--timed-start`` rank 0 writes when each timed
generation starts and ends, and waits for the launcher's go before each after the first,
before the barrier (``emu.timed_start``). With ``--parent-pid`` the rank exits as soon as its
launcher is gone.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch

from edgetwin.emu import rank_process
from edgetwin.emu.llm.exchange import Exchange
from edgetwin.emu.llm.generation import Generation, RankSetup, SingleRank
from edgetwin.emu.llm.model import Decoder, build_decoder, make_prompt
from edgetwin.emu.llm.records import GenerationTiming, RankRecord, write_record
from edgetwin.emu.llm.runs import DecoderRun, add_run_flags, run_from_args
from edgetwin.emu.llm.strategies import rank_generator
from edgetwin.emu.llm.timing import DECODE, PREFILL, GenerationClock
from edgetwin.errors import OneLineParser
from edgetwin.models.strategies import single


def parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m edgetwin.emu.llm.worker", description=__doc__.split("\n\n")[0]
    )
    rank_process.add_process_group_flags(parser, world=False)
    add_run_flags(parser)
    run = parser.add_argument_group("execution and output")
    run.add_argument("--weights", type=Path, help="state_dict to load (Hugging Face Llama names)")
    run.add_argument("--warmup", type=int, default=1, help="untimed generations")
    run.add_argument("--reps", type=int, default=1, help="timed generations")
    rank_process.add_execution_flags(run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    cli = parser()
    args = rank_process.parse_rank_args(cli, argv)
    try:
        run = run_from_args(args)
    except ValueError as exc:
        cli.error(str(exc))
    rank_process.check_rank_and_reps(cli, args, run.world)
    if args.weights is not None and not args.weights.is_file():
        cli.error(f"--weights {args.weights}: file not found")
    rank_process.apply_execution_flags(cli, args)
    try:
        model = build_decoder(run.spec, run.seed, args.weights, args.device)
    except ValueError as exc:
        cli.error(str(exc))
    record = run_rank(args, run, model)
    if args.result is not None:
        write_record(args.result, record)
    return 0


def run_rank(args: argparse.Namespace, run: DecoderRun, model: Decoder) -> RankRecord:
    """Join the process group, generate (warm-up, then timed), compare, leave the group."""
    device = model.embed_tokens.weight.device
    with rank_process.process_group(args, run.world), torch.inference_mode():
        clock = GenerationClock(device)
        exchange = Exchange(clock, device) if run.world > 1 else None
        generator = rank_generator(RankSetup(run, model, args.rank, clock, exchange))
        prompt = make_prompt(run.spec, run.batch, run.prompt_tokens, run.seed).to(device)
        reps: list[GenerationTiming] = []
        warmup_ms: list[float] = []
        gate = rank_process.TimedGate(args)
        for rep in range(args.warmup + args.reps):
            timed_run = rep - args.warmup  # the timed generations, counted from 0
            if timed_run >= 0:
                gate.wait_go(timed_run)  # rank 0 alone; the others wait at the barrier
            rank_process.barrier(run.world)
            if timed_run >= 0:
                gate.started(timed_run)
            if exchange is not None:
                exchange.reset()
            clock.start()
            generation = generator.generate(prompt)
            timing = clock.stop_generation()
            if timed_run >= 0:
                gate.ended(timed_run)
                reps.append(timing)
            else:
                warmup_ms.append(timing.total_ms)
        rank_process.barrier(run.world)
    record = RankRecord(
        args.rank,
        run.world,
        run.strategy,
        str(device),
        torch.get_num_threads(),
        tuple(reps),
        dict(exchange.bytes_sent) if exchange is not None else {PREFILL: 0, DECODE: 0},
        None if generation.tokens is None else tuple(map(tuple, generation.tokens.tolist())),
        generator.kv_cache_bytes,
        tuple(warmup_ms),
    )
    if args.rank == run.world - 1 and run.world > 1:
        record = _compare_with_single(record, run, model, prompt, generation)
    return record


def _compare_with_single(
    record: RankRecord, run: DecoderRun, model: Decoder, prompt: torch.Tensor, got: Generation
) -> RankRecord:
    """The last rank: its logits and tokens against the whole model in this process."""
    if got.logits is None or got.tokens is None:
        raise ValueError(f"{run.strategy}: the last rank holds no logits to compare")
    alone = replace(run, strategy=single.NAME, world=1, segments=None, layer_split=None)
    device = model.embed_tokens.weight.device
    setup = RankSetup(alone, model, 0, GenerationClock(device), None)
    with torch.inference_mode():
        reference = SingleRank(setup).generate(prompt)
    max_diff, agreement = compare_generations(got, reference)
    return replace(record, max_abs_diff_vs_single=max_diff, prefix_agreement_vs_single=agreement)


def compare_generations(got: Generation, reference: Generation) -> tuple[float, float]:
    """How a generation compares with the reference's from the same prompt: the largest
    logit difference, and the share of output tokens equal to the reference's before the
    first that differs (mean over sequences). Once a token differs the two sequences go
    on from different prefixes, so only the steps up to it are compared: that step's
    logits still came from the same input, the later ones did not."""
    assert got.tokens is not None and got.logits is not None
    assert reference.tokens is not None and reference.logits is not None
    agreed = (got.tokens == reference.tokens).int().cumprod(dim=1).sum(dim=1)  # [B]
    steps = torch.arange(got.tokens.shape[1], device=agreed.device)
    compared = steps[:, None] <= agreed[None, :]  # [O, B]: the same prefix so far
    diffs = (got.logits - reference.logits).abs().amax(dim=-1)  # [O, B]
    share = agreed.float().mean() / got.tokens.shape[1]
    return float(diffs[compared].max()), float(share)


if __name__ == "__main__":
    sys.exit(main())
