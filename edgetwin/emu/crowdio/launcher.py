"""A foreman and K worker processes: submit one job, return its summary, clean up.

Every process is started with ``python -m`` (the same entry points as on real
machines), shares a temporary file store, and is stopped (terminate, then kill)
and its temporary folders removed however the run ends. A ``Placement`` says where
a process starts and where the foreman listens: on loopback (``run_pipeline_local``)
or on emulated hosts (``edgetwin.emu.mininet.crowd``). ``kill`` is fault injection:
SIGKILL the worker that receives a chosen task, as a volunteer leaving mid-task
would (or SIGSTOP it, SIGCONT it later: a phone gone silent); more generally a
``Watch`` sees the worker processes and then every event of the job (timed faults
start at its first).
"""

from __future__ import annotations

import asyncio
import functools
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from edgetwin.emu.child_env import child_env
from edgetwin.emu.crowdio.liveness import LivenessRule
from edgetwin.emu.crowdio.protocol import INLINE_MAX_BYTES, TOKEN_ENV
from edgetwin.emu.crowdio.records import Event, PipelineSummary
from edgetwin.emu.crowdio.sdk import JobError, PipelineJob, submit_job
from edgetwin.emu.process_exit import describe_exit, killed_hint
from edgetwin.errors import LaunchError
from edgetwin.models.strategy import CROWDIO_FOREMAN
from edgetwin.run_folders import local_folder

HOST = "127.0.0.1"
STOP_GRACE_S = 5.0
STORE = "store"  # the file store foreman and workers share, in the job's folder
WORKERS_POLL_S = 0.5  # how often a job checks that a worker process is left
WORKERLESS_POLLS = 2  # polls in a row with no worker left before the job fails
WORKER = "edgetwin.emu.crowdio.worker"  # a phone's process


@dataclass(frozen=True)
class KillPlan:
    """Send ``signum`` (SIGKILL) to the worker that receives the first task of
    ``stage_index``, ``after_s`` later; SIGCONT it ``cont_after_s`` after that, if given."""

    stage_index: int
    after_s: float = 0.2
    signum: int = signal.SIGKILL
    cont_after_s: float | None = None


@dataclass(frozen=True)
class WorkerSpec:
    """One worker: its name, an extra delay per task, a RAM budget and its power model
    (``PowerModel.parse`` overrides, e.g. ``compute_w=2.5``)."""

    name: str
    task_delay_ms: float = 0.0
    ram_mb: float | None = None
    power: str = ""


class Placement(Protocol):
    """Where the processes of a run start: host 0 runs the foreman, host i + 1 worker i."""

    @property
    def foreman_address(self) -> str:
        """The address the foreman listens on, and workers and the SDK connect to."""
        ...

    @property
    def store_over_network(self) -> bool:
        """Whether workers reach the foreman's file store over their links (hosts that
        stand for phones share no disk) rather than as a folder they share."""
        ...

    def spawn(
        self, host: int, argv: list[str], env: dict[str, str], log: Path
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` on ``host`` with ``env``, stdout and stderr to ``log``."""
        ...


@dataclass(frozen=True)
class LocalPlacement:
    """Every process on this machine, the foreman on loopback; its store a shared folder
    unless ``store_over_network``."""

    foreman_address: str = HOST
    store_over_network: bool = False

    def spawn(
        self, host: int, argv: list[str], env: dict[str, str], log: Path
    ) -> subprocess.Popen[bytes]:
        with log.open("wb") as handle:
            return subprocess.Popen(
                argv, env=env, stdin=subprocess.DEVNULL, stdout=handle, stderr=handle
            )


Processes = Mapping[str, subprocess.Popen[bytes]]
Watch = Callable[[Processes], Callable[[Event], None]]  # worker processes -> event callback
Unreachable = Callable[[], Mapping[str, str]]  # workers cut off for good -> how


def run_pipeline_local(
    job: PipelineJob,
    *,
    workers: int = 3,
    timeout_s: float = 120.0,
    inline_max_bytes: int = INLINE_MAX_BYTES,
    task_delay_ms: float | Sequence[float] = 0.0,
    threads: int = 1,
    kill: KillPlan | None = None,
    cache_root: Path | None = None,
    telemetry_dir: Path | None = None,
    job_id: str = "job-1",
    liveness: LivenessRule | None = None,
) -> PipelineSummary:
    """Run ``job`` on a local foreman and ``workers`` worker processes.

    ``task_delay_ms`` slows every inference, of every worker or of worker i by the
    i-th value (heterogeneous devices). ``cache_root`` keeps worker i's model cache
    in ``cache_root/worker-i`` across runs (a second run loads warm); None uses a
    temporary one. ``telemetry_dir`` keeps each worker's log as ``worker-i.csv``.
    TimeoutError when the job has not finished ``timeout_s`` after submission,
    JobError when the foreman refuses or fails it, LaunchError when a process does
    not start; each with the tail of the process logs. ValueError, before anything starts,
    for fewer than one worker.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1 (got {workers})")
    delays_ms = (
        [float(task_delay_ms)] * workers
        if isinstance(task_delay_ms, float | int)
        else list(task_delay_ms)
    )
    if len(delays_ms) != workers:
        raise ValueError(f"task_delay_ms has {len(delays_ms)} values for {workers} workers")
    specs = [WorkerSpec(f"worker-{i}", delay_ms) for i, delay_ms in enumerate(delays_ms)]
    return run_pipeline(
        job,
        specs,
        LocalPlacement(),
        timeout_s=timeout_s,
        inline_max_bytes=inline_max_bytes,
        threads=threads,
        cache_root=cache_root,
        telemetry_dir=telemetry_dir,
        job_id=job_id,
        watch=None if kill is None else functools.partial(_killer, kill),
        liveness=liveness,
    )


def run_pipeline(
    job: PipelineJob,
    workers: Sequence[WorkerSpec],
    placement: Placement,
    *,
    timeout_s: float = 120.0,
    inline_max_bytes: int = INLINE_MAX_BYTES,
    threads: int = 1,
    cache_root: Path | None = None,
    telemetry_dir: Path | None = None,
    job_id: str = "job-1",
    watch: Watch | None = None,
    unreachable: Unreachable | None = None,
    liveness: LivenessRule | None = None,
    work_root: Path | None = None,
    ended: Callable[[], None] | None = None,
) -> PipelineSummary:
    """Run ``job`` on a foreman and one process per worker, started by ``placement``.

    As ``run_pipeline_local``; ``watch`` gets the worker processes by name, and what it
    returns every event of the job, on the SDK's event loop; ``ended`` is called as the
    job's summary arrives, before any process is stopped (what follows is the wind-down,
    not the job: a fault clock stops there). ``unreachable`` gives the
    workers cut off from the foreman until the job ends (a link down for good), each
    with how: once every worker has exited or is cut off, the job fails. ``liveness`` is the
    foreman's heartbeat rule (None: its default), and a worker takes a foreman silent for
    its ``silence_timeout_s`` as gone; a worker cut off from the foreman
    tries to enrol again until ``timeout_s``. The foreman listens on the placement's
    address, given explicitly. The job's logs, port file and store (given to the
    foreman, and to every worker unless the placement has them reach it over the
    network, where the foreman serves it), and the processes' own temporary files, live in a
    temporary folder under ``work_root`` (None: the system's)."""
    with local_folder("crowdio", work_root) as tmp:
        root = Path(tmp)
        token = secrets.token_hex(16)
        env = child_env(**{TOKEN_ENV: token, "TMPDIR": str(root)})  # their files go with it
        processes: list[subprocess.Popen[bytes]] = []
        address = placement.foreman_address
        try:
            rule = liveness or LivenessRule()
            foreman, port = _start_foreman(root, env, inline_max_bytes, rule, placement, processes)
            for host, worker in enumerate(workers, start=1):
                cache = (cache_root or root / "cache") / worker.name
                command = [
                    *_module(WORKER),
                    *("--foreman", f"{address}:{port}", "--cache", str(cache)),
                    *(() if placement.store_over_network else ("--store", str(root / STORE))),
                    *("--name", worker.name, "--threads", str(threads)),
                    *("--task-delay-ms", str(worker.task_delay_ms), "--power", worker.power),
                    *("--rejoin-s", str(timeout_s)),
                    *("--foreman-timeout-s", str(rule.silence_timeout_s)),
                    *(() if worker.ram_mb is None else ("--ram-mb", str(worker.ram_mb))),
                    *("--parent-pid", str(os.getpid())),  # no worker outlives a killed run
                ]
                if telemetry_dir is not None:
                    command += ["--telemetry", str(telemetry_dir / f"{worker.name}.csv")]
                processes.append(placement.spawn(host, command, env, root / f"{worker.name}.log"))
            by_name = {w.name: p for w, p in zip(workers, processes[1:], strict=True)}
            started = JobStarted(None if watch is None else watch(by_name))
            submit = submit_job(
                address,
                port,
                token,
                job,
                job_id=job_id,
                min_workers=len(workers),
                timeout_s=timeout_s,
                on_event=started.on_event,
            )
            try:
                summary = asyncio.run(_while_a_worker_lives(submit, by_name, unreachable, started))
            except Exception as exc:
                raise _with_logs(exc, root, foreman) from exc
            if ended is not None:
                ended()
            return summary
        finally:
            _stop(processes)


class JobStarted:
    """Whether the foreman has started the job (its first event came), passing every
    event on to ``then``."""

    def __init__(self, then: Callable[[Event], None] | None) -> None:
        self.started = False
        self.then = then

    def on_event(self, event: Event) -> None:
        self.started = True
        if self.then is not None:
            self.then(event)


async def _while_a_worker_lives(
    submit: Coroutine[Any, Any, PipelineSummary],
    workers: Processes,
    unreachable: Unreachable | None,
    started: JobStarted,
) -> PipelineSummary:
    """The job's summary; ``JobError`` once every worker process has exited or is cut off
    for good on two polls in a row (the second leaves a job whose last result is in time
    to finish), since no worker is left to run its tasks, or once a worker process has
    exited before the job started, since the job waits for every worker (without this,
    the job waits out its timeout)."""
    job = asyncio.ensure_future(submit)
    polls_without_worker = 0
    while True:
        done, _ = await asyncio.wait({job}, timeout=WORKERS_POLL_S)
        if done:
            return job.result()
        cut_off = unreachable() if unreachable is not None else {}
        exited = {name for name, process in workers.items() if process.poll() is not None}
        if exited and not started.started:
            job.cancel()
            ends = ", ".join(f"{name} {describe_exit(workers[name].returncode)}" for name in exited)
            raise JobError(f"worker process(es) exited before the job started: {ends}")
        gone = exited | cut_off.keys() >= workers.keys()
        polls_without_worker = polls_without_worker + 1 if gone else 0
        if polls_without_worker >= WORKERLESS_POLLS:
            job.cancel()
            ends = _ends(workers, exited, cut_off)
            if exited >= workers.keys():
                raise JobError("every worker process exited: " + ends)
            raise JobError("no worker can reach the foreman again: " + ends)


def _ends(workers: Processes, exited: Collection[str], cut_off: Mapping[str, str]) -> str:
    """How each worker ended: its process's exit, or how it was cut off."""
    ends = [
        f"{name} {describe_exit(p.returncode)}" if name in exited else cut_off[name]
        for name, p in workers.items()
    ]
    codes = [p.returncode for name, p in workers.items() if name in exited]
    return ", ".join(ends) + killed_hint(codes, faults=True)


def _module(module: str) -> list[str]:
    return [sys.executable, "-m", module]


def _start_foreman(
    root: Path,
    env: dict[str, str],
    inline_max_bytes: int,
    liveness: LivenessRule,
    placement: Placement,
    processes: list[subprocess.Popen[bytes]],
) -> tuple[subprocess.Popen[bytes], int]:
    port_file = root / "foreman.port"
    command = [
        *_module(CROWDIO_FOREMAN),
        *("--host", placement.foreman_address, "--port", "0", "--store", str(root / STORE)),
        *("--inline-max-kb", str(inline_max_bytes / 1024), "--port-file", str(port_file)),
        *("--heartbeat-s", str(liveness.heartbeat_s)),
        *("--silence-timeout-s", str(liveness.silence_timeout_s)),
        *("--parent-pid", str(os.getpid())),  # nor the foreman
    ]
    if liveness.task_deadline_s is not None:
        command += ["--task-deadline-s", str(liveness.task_deadline_s)]
    if placement.store_over_network:
        command.append("--serve-store")
    foreman = placement.spawn(0, command, env, root / "foreman.log")
    processes.append(foreman)
    deadline = time.monotonic() + 60.0
    while not port_file.exists():
        if foreman.poll() is not None or time.monotonic() > deadline:
            raise _with_logs(LaunchError("the foreman did not start"), root, foreman)
        time.sleep(0.02)
    return foreman, int(port_file.read_text())


def _killer(plan: KillPlan, by_name: Processes) -> Callable[[Event], None]:
    killed: list[str] = []

    def on_event(event: Event) -> None:
        if killed or event.kind != "dispatch" or event.stage_index != plan.stage_index:
            return
        victim = by_name[str(event.worker)]
        killed.append(str(event.worker))
        loop = asyncio.get_running_loop()
        loop.call_later(plan.after_s, victim.send_signal, plan.signum)
        if plan.cont_after_s is not None:
            loop.call_later(plan.after_s + plan.cont_after_s, victim.send_signal, signal.SIGCONT)

    return on_event


def _with_logs(exc: Exception, root: Path, foreman: subprocess.Popen[bytes]) -> Exception:
    """``exc`` with the tail of every process log added to its message."""
    tails = []
    for log in sorted(root.glob("*.log")):
        lines = log.read_text(errors="replace").strip().splitlines()[-5:]
        if lines:
            tails.append(f"--- {log.name}\n" + "\n".join(lines))
    if foreman.poll() is not None:
        code = foreman.returncode
        tails.append(f"(the foreman {describe_exit(code)}{killed_hint([code])})")
    message = "\n".join([str(exc), *tails])
    kind = type(exc) if isinstance(exc, LaunchError | TimeoutError | JobError) else LaunchError
    return kind(message)


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """Terminate every process (foreman first: workers then see it close), kill stragglers."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for process in processes:
        try:
            process.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
