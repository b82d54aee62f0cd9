"""Run a real decoder generation as P local ranks on loopback; fail cleanly, leave
nothing behind.

Each rank is ``python -m edgetwin.emu.llm.worker`` with its own command line
(``rank_command``), the same command a Mininet host or a board runs. The launcher
checks the run before starting anything, picks a free port, waits with a deadline and
kills every rank still running when one fails, when the deadline passes, or on Ctrl-C
(``vit.launcher``'s waiting and stopping).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from edgetwin.decoder_spec import DecoderSpec
from edgetwin.emu.child_env import child_env
from edgetwin.emu.llm.records import RankRecord, read_record
from edgetwin.emu.llm.runs import DecoderRun
from edgetwin.emu.vit.launcher import (
    LOOPBACK_ADDR,
    LOOPBACK_IFACE,
    free_port,
    stop_ranks,
    wait_ranks,
)
from edgetwin.run_folders import LOCAL, run_folder
from edgetwin.this_machine import available_cores

WORKER = "edgetwin.emu.llm.worker"
DEFAULT_TIMEOUT_S = 600.0


def run_decoder(
    spec: DecoderSpec,
    strategy: str,
    world: int,
    prompt_tokens: int,
    output_tokens: int = 1,
    batch: int = 1,
    segments: int | None = None,
    layer_split: Sequence[int] | None = None,
    seed: int = 0,
    *,
    threads: int | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    warmup: int = 1,
    reps: int = 1,
    weights: Path | None = None,
    device: str = "cpu",
) -> list[RankRecord]:
    """Greedy generation by ``strategy`` on ``world`` local ranks: one record per rank.

    Raises ``ValueError`` for a run that cannot be done (nothing is started) and
    ``LaunchError`` if a rank fails or the deadline ``timeout_s`` passes.
    """
    if reps < 1 or warmup < 0:  # the ranks refuse them, after their start-up
        name, value, least = ("reps", reps, 1) if reps < 1 else ("warmup", warmup, 0)
        raise ValueError(f"{name} must be >= {least} (got {value})")
    split = None if layer_split is None else tuple(layer_split)
    run = DecoderRun(
        spec, strategy, world, prompt_tokens, output_tokens, batch, segments, split, seed
    )
    extra = ["--warmup", str(warmup), "--reps", str(reps), "--device", device]
    if weights is not None:
        extra += ["--weights", str(weights)]
    return launch_decoder(run, timeout_s, threads, extra)


def launch_decoder(
    run: DecoderRun,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    threads: int | None = None,
    extra_args: Sequence[str] = (),
) -> list[RankRecord]:
    """``run`` on loopback; ``threads``: torch threads per rank (default: the cores this
    process may use, shared evenly); ``extra_args``: more worker flags. A deadline or a
    thread count that cannot be met is a ValueError, before any rank starts."""
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0 (got {timeout_s})")
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be >= 1 (got {threads})")
    threads = threads or max(1, available_cores() // run.world)
    common = [
        *run.worker_args(),
        *extra_args,
        *group_args(LOOPBACK_ADDR, free_port(), LOOPBACK_IFACE, timeout_s),
        *("--threads", str(threads), "--parent-pid", str(os.getpid())),
    ]
    with run_folder(LOCAL, "llm") as tmp:
        folder = Path(tmp)
        ranks: list[subprocess.Popen[bytes]] = []
        try:
            for rank in range(run.world):
                ranks.append(
                    _start(
                        rank_command(rank, common, folder / f"rank{rank}.json"),
                        folder / f"rank{rank}.log",
                    )
                )
            wait_ranks(ranks, folder, timeout_s)
        finally:
            stop_ranks(ranks)
        return [read_record(folder / f"rank{rank}.json") for rank in range(run.world)]


def group_args(master_addr: str, master_port: int, iface: str, timeout_s: float) -> list[str]:
    """The worker flags that say where rank 0 is and how long a GLOO operation may take."""
    return [
        *("--master-addr", master_addr, "--master-port", str(master_port)),
        *("--iface", iface, "--timeout-s", str(timeout_s)),
    ]


def rank_command(rank: int, common: Sequence[str], result: Path) -> list[str]:
    """The command line of one rank, writing its record to ``result``."""
    return [sys.executable, "-m", WORKER, "--rank", str(rank), "--result", str(result), *common]


def _start(command: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    env = child_env()
    with log_path.open("wb") as log:
        return subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env)
