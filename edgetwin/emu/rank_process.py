"""What every real rank process shares (a ViT's and a decoder's): its flags for the GLOO
process group and the execution, applying them, and joining and leaving the group."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from edgetwin.emu.timed_start import TimedRuns
from edgetwin.parent_watch import exit_with_parent


def add_process_group_flags(parser: argparse.ArgumentParser, *, world: bool) -> None:
    """The group "process group": rank, ``--world`` where ``world``, rank 0's address,
    the GLOO interface and timeout, the launcher to exit with."""
    where = parser.add_argument_group("process group")
    where.add_argument("--rank", type=int, required=True)
    if world:
        where.add_argument("--world", type=int, required=True, help="number of ranks P")
    where.add_argument("--master-addr", default="127.0.0.1", help="address of rank 0")
    where.add_argument("--master-port", type=int, default=29500)
    where.add_argument("--iface", help="network interface for GLOO (sets GLOO_SOCKET_IFNAME)")
    where.add_argument("--timeout-s", type=float, default=300.0, help="GLOO operation timeout")
    where.add_argument("--parent-pid", type=int, help="exit when this process is gone")


def parse_rank_args(cli: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The rank's arguments; with ``--parent-pid``, the rank exits once its launcher is gone."""
    args = cli.parse_args(argv)
    if args.parent_pid is not None:
        exit_with_parent(args.parent_pid, "rank")
    return args


def check_rank_and_reps(cli: argparse.ArgumentParser, args: argparse.Namespace, world: int) -> None:
    """Refuse a rank outside ``[0, world)`` and fewer than one timed or negative warm-up reps."""
    if not 0 <= args.rank < world:
        cli.error(f"--rank must be in [0, {world})")
    if args.reps < 1 or args.warmup < 0:
        cli.error("--reps must be >= 1 and --warmup >= 0")


def add_execution_flags(group: argparse._ArgumentGroup) -> None:
    """``--device``, ``--threads``, ``--result`` and ``--timed-start``, in ``group``."""
    group.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    group.add_argument("--threads", type=int, help="torch intra-op threads of this rank")
    group.add_argument("--result", type=Path, help="write this rank's measurements here (JSON)")
    group.add_argument(
        "--timed-start",
        type=Path,
        help="rank 0 writes here as each timed run starts and ends, and waits for the "
        "launcher's go before each after the first (emu.timed_start: the emulator's "
        "schedule plays from 0 ms in each)",
    )


def apply_execution_flags(cli: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse ``--device cuda`` without a GPU and ``--threads`` below 1; set the GLOO
    interface and torch's threads."""
    if args.device == "cuda" and not torch.cuda.is_available():
        cli.error("--device cuda, but torch sees no CUDA GPU")
    if args.threads is not None and args.threads < 1:
        cli.error("--threads must be >= 1")
    if args.iface:
        os.environ["GLOO_SOCKET_IFNAME"] = args.iface
    if args.threads is not None:
        torch.set_num_threads(args.threads)


@contextmanager
def process_group(args: argparse.Namespace, world: int) -> Iterator[None]:
    """Join the GLOO group of ``world`` ranks (none for one rank); leave it on the way out."""
    if world > 1:
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://{args.master_addr}:{args.master_port}",
            rank=args.rank,
            world_size=world,
            timeout=timedelta(seconds=args.timeout_s),
        )
    try:
        yield
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def barrier(world: int) -> None:
    """Wait for every rank (nothing to wait for with one)."""
    if world > 1:
        dist.barrier()


class TimedGate:
    """Each timed run's start and end told to the launcher (``--timed-start``; nothing
    without it): rank 0 waits for its go before every run after the first, the other
    ranks at a barrier behind it, all outside the timed work."""

    def __init__(self, args: argparse.Namespace) -> None:
        self._on = args.timed_start is not None
        # at most the launch's deadline after the rank's work begins: no lost launcher hangs
        # a rank (not from the module's import: a process that runs ranks in turn, as a
        # test does, imported it long before)
        deadline = time.monotonic() + args.timeout_s
        told = self._on and args.rank == 0
        self._runs = TimedRuns(args.timed_start, deadline) if told else None

    def wait_go(self, run: int) -> bool:
        """Rank 0 waits for run ``run``'s go; whether the run needed one (then every rank
        must pass a barrier before it)."""
        if not self._on or run == 0:
            return False
        if self._runs is not None:
            self._runs.wait_go(run)
        return True

    def started(self, run: int) -> None:
        if self._runs is not None:
            self._runs.started(run)

    def ended(self, run: int) -> None:
        if self._runs is not None:
            self._runs.ended(run)
