"""One rank as a process; runs on loopback (see ``launcher``) or on a real board.

    python -m edgetwin.emu.vit.worker --rank R --world P --master-addr A --master-port N \\
        --strategy prism --segments 10 --batch 8 [--iface eth0] [--result rank.json]

Every rank builds the same weights (seeded, or ``--weights``). Runs are the
product of ``--segments`` (or ``--cr``) and ``--batch``, in that order; each
has ``--warmup`` untimed forwards, then ``--reps`` timed ones, with a barrier
between forwards. Rank 0 then compares its last logits with the whole model
run in its own process on the same input, and prints one line per run. With
``--progress``, rank 0 also appends a line to that file as it ends each timed forward
(its launcher's progress), and with ``--timed-start`` it writes when each timed forward
starts and ends, and waits for the launcher's go before each after the first (before a
run's first, ahead of its warm-ups: they meet the links as set for it), the other ranks
at a barrier (``emu.timed_start``; the forwards are numbered across runs). With
``--parent-pid`` the rank exits as soon as that process (its launcher) is no longer its
parent: a launcher killed outright leaves no rank running.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch
from pydantic import ValidationError
from torch import Tensor

from edgetwin.emu import rank_process
from edgetwin.emu.vit.model import ViT, build_vit, image_side, make_images
from edgetwin.emu.vit.phases import ForwardTiming, PhaseClock
from edgetwin.emu.vit.records import RankRecord, RunRecord, write_record
from edgetwin.emu.vit.strategies import Forward, check_split, rank_forward
from edgetwin.errors import InputError, OneLineParser
from edgetwin.model_spec import ModelSpec
from edgetwin.models import registry
from edgetwin.models.layout import resolved_segments
from edgetwin.models.strategy import VIT_WORKER
from edgetwin.number_text import figure_text
from edgetwin.policies.adaptive import AdaptivePolicy

MODEL_FLAGS = {
    "tokens": int,
    "width": int,
    "blocks": int,
    "heads": int,
    "mlp_ratio": float,
    "patch_size": int,
    "channels": int,
    "classes": int,
}


def model_args(spec: ModelSpec) -> list[str]:
    """The worker flags that describe ``spec``."""
    args = []
    for name in MODEL_FLAGS:
        args += [f"--{name.replace('_', '-')}", str(getattr(spec, name))]
    return args


def real_strategies() -> tuple[str, ...]:
    """The strategies this worker runs."""
    return tuple(s.name for s in registry.strategies() if s.entry_point == VIT_WORKER)


def parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m edgetwin.emu.vit.worker", description=__doc__.split("\n\n")[0]
    )
    rank_process.add_process_group_flags(parser, world=True)
    what = parser.add_argument_group("what to run")
    what.add_argument("--strategy", choices=(*real_strategies(), "adaptive"), required=True)
    what.add_argument(
        "--policy-map",
        type=Path,
        help="adaptive: the performance map (JSON) the terminal decides from at run time",
    )
    what.add_argument("--bandwidth-mbps", type=float, help="adaptive: the bandwidth observed now")
    per_block = what.add_mutually_exclusive_group()
    per_block.add_argument("--segments", type=int, nargs="+", help="prism: segments L")
    per_block.add_argument("--cr", type=float, nargs="+", help="prism: compression ratio N/(LP)")
    what.add_argument("--batch", type=int, nargs="+", default=[1])
    what.add_argument("--warmup", type=int, default=1, help="untimed forwards per run")
    what.add_argument("--reps", type=int, default=5, help="timed forwards per run")
    what.add_argument("--input-source", choices=("terminal", "replicated"), default="terminal")
    model = parser.add_argument_group("model (default: ViT-B/16 shape, 10 classes)")
    model.add_argument("--preset", help="a model preset of the scenario schema, e.g. vit_b16")
    for name, kind in MODEL_FLAGS.items():
        model.add_argument(f"--{name.replace('_', '-')}", type=kind)
    model.add_argument("--weights", type=Path, help="state_dict to load (timm ViT names)")
    model.add_argument("--seed", type=int, default=0, help="random weights and input images")
    run = parser.add_argument_group("execution and output")
    rank_process.add_execution_flags(run)
    run.add_argument("--trace-dir", type=Path, help="write PyTorch profiler Chrome traces here")
    run.add_argument("--trace-batch", type=int, help="trace only runs of this batch size")
    run.add_argument(
        "--progress",
        type=Path,
        help="rank 0 appends a line 'RUN REP' (indices from 0) here as it ends each timed forward",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    cli = parser()
    args = rank_process.parse_rank_args(cli, argv)
    try:
        spec = ModelSpec.model_validate(
            {"preset": args.preset}
            | {name: getattr(args, name) for name in MODEL_FLAGS if getattr(args, name) is not None}
        )
    except ValidationError as exc:
        cli.error(f"bad model: {exc.errors()[0]['msg']}")
    rank_process.check_rank_and_reps(cli, args, args.world)
    if args.strategy == "adaptive":
        _decide(cli, args, spec.tokens)
        if args.rank >= args.world:
            print(f"rank {args.rank}: idle, the policy chose {args.world} device(s)")
            return 0
    if min(args.batch) < 1:
        cli.error("--batch must be >= 1")
    if args.cr and not all(math.isfinite(cr) and cr >= 1 for cr in args.cr):
        cli.error("--cr must be a finite number >= 1 (CR = N / (L P))")
    segment_values: list[int | None] = [None]
    if args.cr or args.segments:  # L as it runs and is recorded: at most a partition's rows
        asked = [(None, cr) for cr in args.cr or ()] + [(L, None) for L in args.segments or ()]
        segment_values = [resolved_segments(spec.tokens, args.world, *L_cr) for L_cr in asked]
    try:
        image_side(spec)
        for segments in segment_values:
            check_split(args.strategy, spec, args.world, segments)
    except ValueError as exc:
        cli.error(str(exc))
    rank_process.apply_execution_flags(cli, args)
    try:
        model = build_vit(spec, args.seed, args.weights, torch.device(args.device))
    except ValueError as exc:
        cli.error(str(exc))
    record = run_rank(args, model, segment_values)
    if args.result is not None:
        write_record(args.result, record)
    return 0


def _decide(cli: argparse.ArgumentParser, args: argparse.Namespace, tokens: int) -> None:
    """Replace ``--strategy adaptive`` by the policy's choice for this batch, bandwidth and
    sequence length.

    Every rank reads the same map and gets the same decision, so no message is needed.
    The policy may use fewer devices than the ranks up: ``args.world`` becomes its count.
    """
    if args.policy_map is None or args.bandwidth_mbps is None or len(args.batch) != 1:
        cli.error("--strategy adaptive needs --policy-map, --bandwidth-mbps and one --batch")
    try:
        policy = AdaptivePolicy.from_map(args.policy_map)
    except InputError as exc:
        cli.error(exc.message)
    try:
        decision = policy.choose(args.batch[0], args.bandwidth_mbps, args.world, tokens)
    except ValueError as exc:  # a batch or bandwidth that cannot be observed
        cli.error(str(exc))
    args.world = decision.devices  # at most the ranks up: ranks 0 .. devices-1 run it
    args.strategy = decision.strategy
    args.segments = None if decision.segments is None else [decision.segments]
    args.cr = None
    if args.rank == 0:
        print(f"policy: {decision.label} (expected {decision.expected_latency_ms:.1f} ms)")


def run_rank(args: argparse.Namespace, model: ViT, segment_values: list[int | None]) -> RankRecord:
    """Join the process group, do every run (segments x batch), leave the group."""
    device = torch.device(args.device)
    gate = rank_process.TimedGate(args)
    with rank_process.process_group(args, args.world), torch.inference_mode():
        plan = [(segments, batch) for segments in segment_values for batch in args.batch]
        runs = tuple(
            _run(args, model, device, batch, segments, index, gate)
            for index, (segments, batch) in enumerate(plan)
        )
    return RankRecord(
        args.rank, args.world, args.strategy, str(device), torch.get_num_threads(), runs
    )


def _run(
    args: argparse.Namespace,
    model: ViT,
    device: torch.device,
    batch: int,
    segments: int | None,
    index: int,
    gate: rank_process.TimedGate,
) -> RunRecord:
    clock = PhaseClock(device)
    forward = rank_forward(
        args.strategy, model, args.rank, args.world, segments, batch, clock, args.input_source
    )
    embeds_here = args.rank == 0 or args.input_source == "replicated"
    images = make_images(model.spec, batch, args.seed).to(device) if embeds_here else None
    first_run = index * args.reps  # the launch's timed forwards, counted from 0
    if gate.wait_go(first_run):  # the links set for it before its warm-ups, not after
        rank_process.barrier(args.world)
    warmup_ms = []
    for _ in range(args.warmup):
        clock.start()
        forward(images)
        warmup_ms.append(clock.stop().total_ms)
        rank_process.barrier(args.world)
    reps: list[ForwardTiming] = []
    logits = None
    for rep in range(args.reps):
        timed_run = first_run + rep
        if rep > 0 and gate.wait_go(timed_run):
            rank_process.barrier(args.world)
        gate.started(timed_run)
        clock.start()
        logits = forward(images)
        reps.append(clock.stop())
        gate.ended(timed_run)
        if args.rank == 0 and args.progress is not None:  # before the barrier: it waits
            _report_rep(args.progress, index, rep)  # for the write, the next forward not
        rank_process.barrier(args.world)
    if args.trace_dir is not None and args.trace_batch in (None, batch):
        _trace(args, forward, clock, images, segments)
    record = RunRecord(batch, segments, tuple(reps), forward.bytes_sent, tuple(warmup_ms))
    if logits is None:
        return record
    record = _compare_with_single(record, model, images, logits, args.world)
    print(summary_line(args.strategy, args.world, record), flush=True)
    return record


def _report_rep(path: Path, run_index: int, rep: int) -> None:
    """Tell the launcher that a timed forward ended: one whole line ``RUN REP``."""
    with path.open("a") as out:
        out.write(f"{run_index} {rep}\n")


def _trace(
    args: argparse.Namespace,
    forward: Forward,
    clock: PhaseClock,
    images: Tensor | None,
    segments: int | None,
) -> None:
    """One more forward under the PyTorch profiler, phases labelled, as a Chrome trace."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if clock.device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    clock.label_phases = True
    with torch.profiler.profile(activities=activities) as profiler:
        clock.start()
        forward(images)
        clock.stop()
    clock.label_phases = False
    rank_process.barrier(args.world)
    name = args.strategy + ("" if segments is None else f"_L{segments}")
    args.trace_dir.mkdir(parents=True, exist_ok=True)
    path = args.trace_dir / f"trace_{name}_b{forward.batch}_rank{args.rank}.json"
    profiler.export_chrome_trace(str(path))


def _compare_with_single(
    record: RunRecord, model: ViT, images: Tensor | None, logits: Tensor, world: int
) -> RunRecord:
    """Rank 0: keep the logits and, if distributed, compare them with the whole model's."""
    record = replace(record, logits=tuple(tuple(row) for row in logits.tolist()))
    if world == 1 or images is None:
        return record
    reference = model(images)
    return replace(
        record,
        max_abs_diff_vs_single=float((logits - reference).abs().max()),
        top1_agreement_vs_single=float((logits.argmax(-1) == reference.argmax(-1)).float().mean()),
    )


def summary_line(strategy: str, world: int, record: RunRecord) -> str:
    """What rank 0 prints after a run: its medians and, if distributed, how its logits
    compare with the whole model's (``figure_text``: a difference of 3e-06 reads
    ``0.000003``)."""

    def median(values: list[float]) -> float:
        return statistics.median(values) if values else float("nan")

    name = strategy + ("" if record.segments is None else f" L={record.segments}")
    total = median([rep.total_ms for rep in record.reps])
    compute = median([rep.phase_ms("compute") for rep in record.reps])
    staging = median([rep.staging_ms for rep in record.reps])
    comm = median([rep.phase_ms("comm") for rep in record.reps])
    line = (
        f"{name} P={world} batch {record.batch}: total {total:.1f} ms (compute {compute:.1f}"
        f", staging {staging:.1f}, comm {comm:.1f}; median of {len(record.reps)})"
    )
    if record.max_abs_diff_vs_single is not None:
        line += (
            f"; vs single: max |logit diff| {figure_text(record.max_abs_diff_vs_single)}"
            f", top-1 agreement {record.top1_agreement_vs_single:.2f}"
        )
    return line


if __name__ == "__main__":
    sys.exit(main())
