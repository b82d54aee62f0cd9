"""Start P ranks as local processes on loopback; fail cleanly and leave nothing behind.

Each rank is ``python -m edgetwin.emu.vit.worker`` with its own command line,
the same command a Mininet host or a real board runs. The launcher picks a
free port, waits with a deadline, and kills every rank still running when one
fails, when the deadline passes, or on Ctrl-C.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from edgetwin.emu.child_env import child_env
from edgetwin.emu.process_exit import describe_exit, killed_hint
from edgetwin.emu.vit.records import RankRecord, read_record
from edgetwin.errors import LaunchError
from edgetwin.models.strategy import VIT_WORKER
from edgetwin.number_text import exact_text
from edgetwin.run_folders import LOCAL, run_folder
from edgetwin.this_machine import available_cores

LOOPBACK_ADDR = "127.0.0.1"
LOOPBACK_IFACE = "lo"
POLL_S = 0.05
LOG_TAIL_LINES = 12
PROGRESS_FILE = "progress.txt"  # where rank 0 reports each timed forward (worker --progress)

OnRep = Callable[[int, int], None]  # told (run index, rep) as rank 0 ends a timed forward


def free_port() -> int:
    """A TCP port on loopback, kept from other binders until rank 0 listens on it.

    A port merely free now is free for anyone: between this call and rank 0's bind
    (after its torch import, seconds later) another process binding port 0 could get it,
    and rank 0 failed with "address already in use". Here one connection to the port is
    made and closed from the port's side, which leaves it in TIME_WAIT (a minute): the
    kernel gives it to no one who asks for any port, and a bind with SO_REUSEADDR, as
    the rendezvous store's is, takes it at once.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((LOOPBACK_ADDR, 0))
        listener.listen(1)
        address = listener.getsockname()
        with socket.create_connection(address) as client:
            accepted, _ = listener.accept()
            accepted.close()  # this side closes first: its port is the one in TIME_WAIT
            client.recv(1)  # the close has reached the client
        port: int = address[1]
        return port


def launch_local(
    worker_args: Sequence[str],
    world: int,
    timeout_s: float,
    threads: int | None = None,
    echo_rank0: bool = False,
    on_rep: OnRep | None = None,
) -> list[RankRecord]:
    """Run ``world`` ranks with ``worker_args`` (all but rank, world, address, result).

    ``threads``: torch threads per rank (default: the cores this process may use, shared
    evenly). ``echo_rank0``: let rank 0 print to this process's stdout (progress lines).
    ``on_rep``: told each timed forward as rank 0 ends it (``RepReports``).
    Raises ``LaunchError`` naming the rank and showing the end of its log.
    """
    threads = threads or max(1, available_cores() // world)
    common = [
        *worker_args,
        "--world",
        str(world),
        "--master-addr",
        LOOPBACK_ADDR,
        "--master-port",
        str(free_port()),
        "--iface",
        LOOPBACK_IFACE,
        "--timeout-s",
        str(timeout_s),
        "--threads",
        str(threads),
        "--parent-pid",
        str(os.getpid()),
    ]
    with run_folder(LOCAL, "vit") as tmp:
        folder = Path(tmp)
        reports = RepReports(folder, on_rep)
        ranks: list[subprocess.Popen[bytes]] = []
        try:
            for rank in range(world):
                argv = [*common, *reports.worker_args()]
                ranks.append(_start(rank, argv, folder, echo_rank0 and rank == 0))
            wait_ranks(ranks, folder, timeout_s, reports.poll)
        finally:
            stop_ranks(ranks)
        return [read_record(folder / f"rank{rank}.json") for rank in range(world)]


def _start(rank: int, common: list[str], folder: Path, echo: bool) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        VIT_WORKER,
        "--rank",
        str(rank),
        "--result",
        str(folder / f"rank{rank}.json"),
        *common,
    ]
    env = child_env()
    with (folder / f"rank{rank}.log").open("wb") as log:
        return subprocess.Popen(
            command, stdout=None if echo else log, stderr=log, stdin=subprocess.DEVNULL, env=env
        )


class RepReports:
    """The timed forwards rank 0 reports in ``folder``'s progress file, each told to
    ``on_rep`` once, in order, as whole lines appear (``None``: nothing is reported)."""

    def __init__(self, folder: Path, on_rep: OnRep | None) -> None:
        self._path = folder / PROGRESS_FILE
        self._on_rep = on_rep
        self._told = 0

    def worker_args(self) -> list[str]:
        """The worker flag that asks for the reports, if any are wanted."""
        return [] if self._on_rep is None else ["--progress", str(self._path)]

    def poll(self) -> None:
        """Tell the forwards reported since the last poll."""
        if self._on_rep is None or not self._path.exists():
            return
        for line in self._path.read_text().splitlines(keepends=True)[self._told :]:
            if not line.endswith("\n"):  # still being written
                return
            run_index, rep = map(int, line.split())
            self._on_rep(run_index, rep)
            self._told += 1


def wait_ranks(
    ranks: list[subprocess.Popen[bytes]],
    folder: Path,
    timeout_s: float,
    on_poll: Callable[[], None] | None = None,
) -> None:
    """Wait for every rank to exit 0, calling ``on_poll`` between looks; raise
    ``LaunchError`` if one fails or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        codes = [rank.poll() for rank in ranks]
        if on_poll is not None:  # after the look: ranks that exited have reported all
            on_poll()
        ended = {rank: code for rank, code in enumerate(codes) if code is not None and code != 0}
        if ended:
            failed = list(ended)
            reasons = "; ".join(f"rank {r} {describe_exit(c)}" for r, c in ended.items())
            reasons += killed_hint(list(ended.values()))
            raise LaunchError(f"{reasons}; all ranks stopped.{_log_tails(failed, folder)}")
        if all(code == 0 for code in codes):
            return
        if time.monotonic() > deadline:
            running = [rank for rank, code in enumerate(codes) if code is None]
            raise LaunchError(
                f"rank(s) {running} still running after {exact_text(timeout_s)} s (hung, or the "
                f"timeout is too short); all ranks killed.{_log_tails(running, folder)}"
            )
        time.sleep(POLL_S)


def stop_ranks(ranks: list[subprocess.Popen[bytes]]) -> None:
    """Kill every rank still running and reap them all."""
    for rank in ranks:
        if rank.poll() is None:
            rank.kill()
    for rank in ranks:
        rank.wait()


def _log_tails(ranks: list[int], folder: Path) -> str:
    """The last lines each rank wrote (ranks that wrote nothing are left out)."""
    tails = ""
    for rank in ranks:
        lines = (folder / f"rank{rank}.log").read_text(errors="replace").splitlines()
        if lines:
            shown = "\n  ".join(lines[-LOG_TAIL_LINES:])
            tails += f"\n--- end of rank {rank}'s log:\n  {shown}"
    return tails
