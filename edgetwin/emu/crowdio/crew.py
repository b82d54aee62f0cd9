"""The real foreman's workers and running jobs around the decision core.

One ``CrowdCore`` (``edgetwin.models.crowd``) for every job in flight: the crew
tells it what the workers' replies say, turns its orders into frames (an
``Outbox``; the foreman does the I/O) and writes its decisions as each job's
events (``job_start``, ``load``, ``dispatch``, ``release``, ``complete``,
``requeue``, ``job_done``; the connection adds ``loaded``, ``load_failed``,
``unload``, ``task_failed`` and ``disconnect``). Handlers raise ProtocolError
when a worker's reply does not fit what it was asked to do; a result that is not
what its stage declares fails its task, as a TASK_FAILED would. Stages are known to
the core by name and checksum (``stage_key``), as a worker knows what it holds.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import numpy as np

from edgetwin.emu.crowdio.codec import DEFAULT_LIMITS, Limits
from edgetwin.emu.crowdio.dispatch import JobStage, WorkerState, stage_key
from edgetwin.emu.crowdio.filestore import FileStore
from edgetwin.emu.crowdio.job import MAX_TASK_FAILURES, Job, Outbox, ResultRefused, discard
from edgetwin.emu.crowdio.protocol import (
    ModelFailed,
    ModelLoaded,
    ModelUnloaded,
    ProtocolError,
    SubmitPipelineJob,
    TaskFailed,
    TaskResult,
)
from edgetwin.emu.crowdio.records import Event, EventKind
from edgetwin.models.crowd.core import CrowdCore, Load, Order
from edgetwin.models.crowd.events import Decision
from edgetwin.models.crowd.table import Task, waited_load_ms
from edgetwin.policies.scheduling import make_scheduler

Reply = ModelLoaded | ModelUnloaded | ModelFailed | TaskResult | TaskFailed
EVENT_OF: dict[str, EventKind] = {
    "submit": "job_start",
    "load": "load",
    "assign": "dispatch",
    "release": "release",
    "done": "complete",
    "requeue": "requeue",
    "aggregate": "job_done",
}


class Crew:
    """The enrolled workers (``workers``, updated in place) and the jobs in flight."""

    def __init__(
        self,
        store: FileStore | None,
        clock: Callable[[], float] = time.monotonic,
        limits: Limits = DEFAULT_LIMITS,
        task_deadline_s: float | None = None,
    ):
        self.store = store
        self.limits = limits
        self.clock = clock
        self.workers: dict[str, WorkerState] = {}
        self.jobs: dict[int, Job] = {}  # running, by the core's job id
        self.by_label: dict[str, Job] = {}
        self.keys_of: dict[str, set[str]] = {}  # the stage keys of each blob's SHA-256
        self.core = CrowdCore(
            lambda worker_id: self.workers[worker_id].facts(self.keys_of),
            self._decided,
            None if task_deadline_s is None else task_deadline_s * 1e3,
        )

    def now_ms(self) -> float:
        return self.clock() * 1e3

    # ------------------------------------------------------------ workers
    def add_worker(self, worker: WorkerState) -> Outbox:
        """A worker enrolled: the running jobs count it, and it may get work."""
        self.workers[worker.worker_id] = worker
        self.core.join(worker.worker_id)
        for job in self.jobs.values():
            job.add_worker(worker)
        return self.dispatch()

    def lose_worker(self, worker: WorkerState, detail: str | None = None) -> Outbox:
        """Re-dispatch a lost worker's task (it disconnected, or ``detail`` says why it was
        declared lost); tasks running elsewhere carry on."""
        worker_id = worker.worker_id
        for job in self.jobs.values():
            job.event(self.now_ms(), "disconnect", worker_id, detail=detail)
            if worker_id in job.stats:
                job.stats[worker_id].disconnected = True
        self.core.leave(worker_id)
        if self.core.workers[worker_id].task is not None:
            self.core.requeue(worker_id, "lost")
        self.core.forget(worker_id)  # ids are never reused: one that comes back is new
        del self.workers[worker_id]
        return self.dispatch()

    def overdue(self) -> list[WorkerState]:
        """The workers whose task ran past the per-task deadline (``CrowdCore.expire``):
        their tasks are queued again; the foreman cuts them off (``lose_worker``)."""
        return [self.workers[worker_id] for worker_id in self.core.expire(self.now_ms())]

    def on_reply(self, worker: WorkerState, message: Reply) -> Outbox:
        """A worker's reply: what it says of its disk and status, then what it answers."""
        if isinstance(message, ModelLoaded):
            worker.cached.add(message.sha256)
            worker.loaded_at_ms = self.now_ms()
        elif isinstance(message, ModelFailed):
            worker.cached.discard(message.sha256)
            key = stage_key(message.stage, message.sha256)
            self.core.load_failed(worker.worker_id, key, lasting=False)
        worker.status = message.status
        for running in self.jobs.values():
            running.on_status(worker, message.status)
        self.core.refresh(worker.worker_id)
        if isinstance(message, TaskResult):
            return self._on_result(worker, message)
        if isinstance(message, TaskFailed):
            return self._on_failed(worker, message)
        if isinstance(message, ModelUnloaded):
            unloaded = self._job_of(worker.unload_jobs)
            if unloaded is not None:
                unloaded.stats[worker.worker_id].evictions += 1
                unloaded.event(self.now_ms(), "unload", worker.worker_id, detail=message.stage)
            return []
        job = self._job_of(worker.load_jobs)
        if job is None:
            return []
        stage = job.by_key.get(stage_key(message.stage, message.sha256))
        if isinstance(message, ModelLoaded):
            stats = job.stats[worker.worker_id]
            if message.load_kind == "cold":
                stats.cold_loads += 1
            else:
                stats.warm_loads += 1
            job.event(self.now_ms(), "loaded", worker.worker_id, stage, detail=message.load_kind)
        else:  # a task queued behind the failed load will fail too, and be requeued
            job.event(self.now_ms(), "load_failed", worker.worker_id, stage, detail=message.error)
        return []

    def _on_result(self, worker: WorkerState, message: TaskResult) -> Outbox:
        """Accept a result exactly once, inject it downstream and dispatch what became ready."""
        job = self.by_label.get(message.job_id)
        if job is None:  # a task of a job that was dropped (job ids are never reused)
            discard(self.store, message.payload)  # its result goes nowhere
            return []
        task = self._check_assigned(job, worker, message)
        try:
            job.accept(message)
        except ResultRefused as exc:
            return self._fail(worker, job, task, str(exc))
        job.stats[worker.worker_id].tasks_done += 1
        task.load_ms = waited_load_ms(message.report.load_ms, worker.loaded_at_ms, task.ready_ms)
        self.core.complete(worker.worker_id, self.now_ms())
        return self.dispatch()

    def _on_failed(self, worker: WorkerState, message: TaskFailed) -> Outbox:
        job = self.by_label.get(message.job_id)
        if job is None:
            return []
        return self._fail(worker, job, self._check_assigned(job, worker, message), message.error)

    def _fail(self, worker: WorkerState, job: Job, task: Task, error: str) -> Outbox:
        """Put a failed task back; the job fails after MAX_TASK_FAILURES on one task (its
        dispatch, which gives the freed workers other jobs' tasks, is the one returned)."""
        self.core.requeue(worker.worker_id, "failed")
        stage = job.stages[task.stage_index]
        job.event(self.now_ms(), "task_failed", worker.worker_id, stage, task.item, error)
        if task.failures >= MAX_TASK_FAILURES:
            job.failure = f"task {(task.item, task.stage_index)} failed {task.failures} times: "
            job.failure += error
            return self.drop(job)
        return self.dispatch()

    # ------------------------------------------------------------ jobs
    def start(
        self, submit: SubmitPipelineJob, stages: list[JobStage], on_event: Callable[[Event], None]
    ) -> tuple[Job, Outbox]:
        """Start a job: broadcast its first stage to every idle worker, then dispatch."""
        now_ms = self.now_ms()
        job = Job(submit, stages, self.store, on_event, now_ms, self.limits)
        for stage in stages:
            self.keys_of.setdefault(stage.sha256, set()).add(stage.key)
        self.jobs[self.core.submitted] = job
        self.by_label[job.job_id] = job
        for worker in self.workers.values():
            job.add_worker(worker)
        scheduler = make_scheduler(submit.scheduler)
        rng = np.random.default_rng(submit.seed)
        job.core, orders = self.core.submit(
            job.job_id, job.core_stages(), len(submit.inputs), submit.mode, scheduler, rng, now_ms
        )
        return job, self._frames(orders)

    def dispatch(self) -> Outbox:
        return self._frames(self.core.dispatch(self.now_ms()))

    def drop(self, job: Job) -> Outbox:
        """Forget a job (finished, failed or abandoned); its workers are free."""
        if self.jobs.pop(job.core.job_id, None) is None:
            return []
        del self.by_label[job.job_id]
        job.release()
        self.core.drop(job.core)
        return self.dispatch()

    # ------------------------------------------------------------ inside
    def _frames(self, orders: list[Order]) -> Outbox:
        outbox: Outbox = []
        for order in orders:
            worker = self.workers[order.worker]
            if isinstance(order, Load):
                job = self.jobs[order.job.job_id]
                outbox += [(worker, frame) for frame in job.load_frames(worker, order)]
            else:
                outbox.append((worker, self.jobs[order.task.job.job_id].run_frame(order.task)))
        return outbox

    def _decided(self, d: Decision) -> None:
        job = self.jobs.get(d.job)
        if job is None or (d.kind == "requeue" and d.detail == "failed"):
            return  # a failed attempt is written as task_failed, with the worker's error
        now_ms = self.now_ms()
        stage = None if d.stage is None else job.by_name[d.stage]
        detail: str | None = None
        if d.kind == "submit":
            detail = f"{len(self.workers)} workers"
        elif d.kind == "load":
            worker = self.workers[str(d.worker)]
            detail = "from cache" if stage and stage.sha256 in worker.cached else "blob sent"
        elif d.kind == "assign":
            detail = f"attempt {d.detail}"
        elif d.kind == "aggregate":
            job.end_ms = now_ms - job.start_ms
        job.event(now_ms, EVENT_OF[d.kind], d.worker, stage, d.item, detail)

    def _job_of(self, pending: deque[int]) -> Job | None:
        return self.jobs.get(pending.popleft()) if pending else None

    def _check_assigned(
        self, job: Job, worker: WorkerState, message: TaskResult | TaskFailed
    ) -> Task:
        key = (message.input_index, message.stage_index)
        task = self.core.workers[worker.worker_id].task
        if (
            task is None
            or task.job is not job.core
            or (task.item, task.stage_index) != key
            or task.attempts != message.attempt
        ):
            raise ProtocolError(f"{message.type} for task {key}, which is not assigned to it")
        return task
