"""Where chunks of a sweep run: in this process, a local process pool, or a Dask cluster.

Every executor calls ``on_done`` in the calling process as each configuration
finishes (in any order); the rows do not depend on the executor.
"""

from __future__ import annotations

import math
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Protocol

from edgetwin.errors import InputError, option_named, shown
from edgetwin.parent_watch import exit_with_parent
from edgetwin.plan.sweep import ConfigResult, Payload, chunks, run_chunk

SCHEDULER = option_named("--scheduler", "scheduler=")  # how an error names the Dask scheduler

OnDone = Callable[[ConfigResult], None]
MAX_CHUNK = 64  # configurations per task: small enough to resume and balance, big enough to batch


class Executor(Protocol):
    """Runs configurations of a sweep and reports each one as it finishes."""

    def run(self, payload: Payload, indexes: Sequence[int], on_done: OnDone) -> None: ...


def chunk_size(total: int, workers: int) -> int:
    """About eight tasks per worker, at most ``MAX_CHUNK`` configurations each."""
    return max(1, min(MAX_CHUNK, math.ceil(total / (8 * max(1, workers)))))


def pool_size(workers: int, tasks: int) -> int:
    """Processes to start: no more than there are tasks (a pool forks all of its workers
    at once, so ``--workers 100000`` for nine tasks would start 100,000), and at least one."""
    return max(1, min(workers, tasks))


class SerialExecutor:
    """Everything in this process, in index order, each unit reported as it finishes (so
    that a stopped sweep keeps every unit it finished)."""

    def run(self, payload: Payload, indexes: Sequence[int], on_done: OnDone) -> None:
        for index in indexes:
            for result in run_chunk(payload, [index]):
                on_done(result)


class PoolExecutor:
    """A local ``ProcessPoolExecutor`` of ``workers`` processes, fed in chunks."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def run(self, payload: Payload, indexes: Sequence[int], on_done: OnDone) -> None:
        tasks = chunks(indexes, chunk_size(len(indexes), self.workers))
        processes = pool_size(self.workers, len(tasks))
        start = leave_stops_to_the_parent
        with ProcessPoolExecutor(processes, initializer=start, initargs=(os.getpid(),)) as pool:
            futures = [pool.submit(run_chunk, payload, c) for c in tasks]
            try:
                for future in as_completed(futures):
                    for result in future.result():
                        on_done(result)
            except BaseException:  # Ctrl-C, SIGTERM or a failed chunk: stop what runs, too
                stop_workers(pool)  # the pool then fails every future left (no cancel():
                raise  # Python 3.11's pool raises in its thread on a cancelled one)


def leave_stops_to_the_parent(parent_pid: int) -> None:
    """A pool worker's start: Ctrl-C, which a terminal sends to every process of the
    command, is ignored (the parent stops the sweep and kills its workers), and SIGTERM
    ends the worker outright. A forked worker inherits the parent's handler that makes
    both an interrupt, and the pool's worker loop printed its traceback. The worker exits
    when ``parent_pid`` is gone: a parent killed outright (SIGKILL) kills no worker, and
    the pool's workers stayed, blocked for good, one per core."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    exit_with_parent(parent_pid, "plan worker")


def stop_workers(pool: ProcessPoolExecutor) -> None:
    """Kill the pool's processes, so that leaving the pool does not wait for the chunks
    they are running (minutes, for a long sweep); SIGKILL, which no worker can catch.
    ``kill_workers`` where Python has it (3.14), else the same on the pool's table of
    processes. A chunk computes only: nothing is left half-written."""
    kill = getattr(pool, "kill_workers", None)
    if kill is not None:
        kill()
        return
    processes: dict[int, Any] = getattr(pool, "_processes", None) or {}
    for process in list(processes.values()):
        if process.is_alive():
            process.kill()


class DaskExecutor:
    """A Dask distributed cluster: a scheduler address (``tcp://host:8786``) or a client.

    Workers need edgetwin installed (and the scenario's profile files at the same paths).
    """

    def __init__(self, scheduler: str | Any) -> None:
        """An InputError at once (before a sweep starts) if Dask is missing, ``scheduler``
        is neither a string nor a ``distributed.Client``, or a string is not an address."""
        self.scheduler = scheduler
        distributed = _distributed()
        if not isinstance(scheduler, str | distributed.Client):
            problem = f"a scheduler's address or a distributed.Client, not {shown(scheduler)}"
            raise InputError(None, SCHEDULER, problem)
        if isinstance(scheduler, str):
            try:
                distributed.comm.resolve_address(scheduler)
            except (OSError, ValueError) as exc:
                raise InputError(None, SCHEDULER, f"not a scheduler address: {exc}") from None

    def run(self, payload: Payload, indexes: Sequence[int], on_done: OnDone) -> None:
        distributed = _distributed()
        if isinstance(self.scheduler, str):
            try:
                connect: Any = distributed.Client
                client = connect(self.scheduler, timeout="10s")
            except OSError as exc:
                raise InputError(None, SCHEDULER, f"cannot connect: {exc}") from None
            with client:
                self._submit(client, distributed.as_completed, payload, indexes, on_done)
        else:
            self._submit(self.scheduler, distributed.as_completed, payload, indexes, on_done)

    @staticmethod
    def _submit(
        client: Any,
        completed: Any,
        payload: Payload,
        indexes: Sequence[int],
        on_done: OnDone,
    ) -> None:
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        parts = chunks(indexes, chunk_size(len(indexes), workers))
        futures = client.map(run_chunk, [payload] * len(parts), parts, pure=False)
        try:
            for future in completed(futures):
                for result in future.result():
                    on_done(result)
        finally:
            client.cancel(futures)


def _distributed() -> Any:
    try:
        # without the dask extra installed, mypy has no module to check
        import distributed  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        problem = "Dask is not installed: pip install 'edgetwin[dask]'"
        raise InputError(None, SCHEDULER, problem) from None
    return distributed
