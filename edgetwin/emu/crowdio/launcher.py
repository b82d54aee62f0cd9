"""A foreman and K worker processes on loopback: submit one job, return its summary, clean up.

Every process is started with ``python -m`` (the same entry points as on real
machines), shares a temporary file store, and is stopped (terminate, then kill)
and its temporary folders removed however the run ends. ``kill`` is fault
injection: SIGKILL the worker that receives a chosen task, as a volunteer
leaving mid-task would.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from edgetwin.emu.crowdio.protocol import TOKEN_ENV
from edgetwin.emu.crowdio.records import Event, PipelineSummary
from edgetwin.emu.crowdio.sdk import JobError, PipelineJob, submit_job

HOST = "127.0.0.1"
STOP_GRACE_S = 5.0


class LaunchError(RuntimeError):
    """A process of the local run did not start or stopped early (the message has its log)."""


@dataclass(frozen=True)
class KillPlan:
    """SIGKILL the worker that receives the first task of ``stage_index``, ``after_s`` later."""

    stage_index: int
    after_s: float = 0.2


def run_pipeline_local(
    job: PipelineJob,
    *,
    workers: int = 3,
    timeout_s: float = 120.0,
    inline_max_bytes: int = 64 * 1024,
    task_delay_ms: float | Sequence[float] = 0.0,
    threads: int = 1,
    kill: KillPlan | None = None,
    cache_root: Path | None = None,
    telemetry_dir: Path | None = None,
    job_id: str = "job-1",
) -> PipelineSummary:
    """Run ``job`` on a local foreman and ``workers`` worker processes.

    ``task_delay_ms`` slows every inference, of every worker or of worker i by the
    i-th value (heterogeneous devices). ``cache_root`` keeps worker i's model cache
    in ``cache_root/worker-i`` across runs (a second run loads warm); None uses a
    temporary one. ``telemetry_dir`` keeps each worker's log as ``worker-i.csv``.
    TimeoutError when the job has not finished ``timeout_s`` after submission,
    JobError when the foreman refuses or fails it, LaunchError when a process does
    not start; each with the tail of the process logs.
    """
    names = [f"worker-{i}" for i in range(workers)]
    delays_ms = (
        [float(task_delay_ms)] * workers
        if isinstance(task_delay_ms, float | int)
        else list(task_delay_ms)
    )
    if len(delays_ms) != workers:
        raise ValueError(f"task_delay_ms has {len(delays_ms)} values for {workers} workers")
    with tempfile.TemporaryDirectory(prefix="crowdio-") as tmp:
        root = Path(tmp)
        token = secrets.token_hex(16)
        env = {**os.environ, TOKEN_ENV: token}
        processes: list[subprocess.Popen[bytes]] = []
        try:
            foreman, port = _start_foreman(root, env, inline_max_bytes, processes)
            for name, delay_ms in zip(names, delays_ms, strict=True):
                cache = (cache_root or root / "cache") / name
                command = [
                    *_module("worker"),
                    *("--foreman", f"{HOST}:{port}", "--cache", str(cache), "--name", name),
                    *("--threads", str(threads), "--task-delay-ms", str(delay_ms)),
                ]
                if telemetry_dir is not None:
                    command += ["--telemetry", str(telemetry_dir / f"{name}.csv")]
                processes.append(_spawn(command, env, root / f"{name}.log"))
            by_name = dict(zip(names, processes[1:], strict=True))
            submit = submit_job(
                HOST,
                port,
                token,
                job,
                job_id=job_id,
                min_workers=workers,
                timeout_s=timeout_s,
                on_event=None if kill is None else _killer(kill, by_name),
            )
            try:
                return asyncio.run(submit)
            except Exception as exc:
                raise _with_logs(exc, root, foreman) from exc
        finally:
            _stop(processes)


def _module(name: str) -> list[str]:
    return [sys.executable, "-m", f"edgetwin.emu.crowdio.{name}"]


def _spawn(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as handle:
        return subprocess.Popen(
            command, env=env, stdin=subprocess.DEVNULL, stdout=handle, stderr=handle
        )


def _start_foreman(
    root: Path, env: dict[str, str], inline_max_bytes: int, processes: list[subprocess.Popen[bytes]]
) -> tuple[subprocess.Popen[bytes], int]:
    port_file = root / "foreman.port"
    command = [
        *_module("foreman"),
        *("--host", HOST, "--port", "0", "--store", str(root / "store")),
        *("--inline-max-kb", str(inline_max_bytes / 1024), "--port-file", str(port_file)),
    ]
    foreman = _spawn(command, env, root / "foreman.log")
    processes.append(foreman)
    deadline = time.monotonic() + 60.0
    while not port_file.exists():
        if foreman.poll() is not None or time.monotonic() > deadline:
            raise _with_logs(LaunchError("the foreman did not start"), root, foreman)
        time.sleep(0.02)
    return foreman, int(port_file.read_text())


def _killer(plan: KillPlan, by_name: dict[str, subprocess.Popen[bytes]]) -> Callable[[Event], None]:
    killed: list[str] = []

    def on_event(event: Event) -> None:
        if killed or event.kind != "dispatch" or event.stage_index != plan.stage_index:
            return
        victim = by_name[str(event.worker)]
        killed.append(str(event.worker))
        asyncio.get_running_loop().call_later(plan.after_s, victim.kill)

    return on_event


def _with_logs(exc: Exception, root: Path, foreman: subprocess.Popen[bytes]) -> Exception:
    """``exc`` with the tail of every process log added to its message."""
    tails = []
    for log in sorted(root.glob("*.log")):
        lines = log.read_text(errors="replace").strip().splitlines()[-5:]
        if lines:
            tails.append(f"--- {log.name}\n" + "\n".join(lines))
    if foreman.poll() is not None:
        tails.append(f"(the foreman exited with status {foreman.returncode})")
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
