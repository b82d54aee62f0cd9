"""The foreman: job records, the dependency manager, dispatch, JIT loading and churn.

On submission a job gets N x S task records, its first-stage tasks are queued
and the first stage is broadcast: every idle connected phone that does not
hold it resident loads it. Later stages are released one by one, at the first
completion of the stage before (JIT deferred loading): the phone whose task
released a stage is sent its load instruction if it is still idle once the
ready tasks are dispatched. The dependency manager injects each result into
the tasks it unblocks (streaming or barrier) and queues them; queued tasks go,
oldest first, to the worker the scheduler picks among the idle phones (see
``candidates``). A phone that leaves loses its task, which is queued again; a
task whose session does not fit a phone is queued again and that phone is not
offered the stage again. When the last stage of every input is done the
foreman aggregates the logits (its cost is modelled) and the job is finished.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Generator, Sequence
from functools import partial
from itertools import count

import numpy as np
import simpy

from edgetwin.policies.scheduling import Scheduler, TaskView
from edgetwin.scenario import CrowdJobSpec, StageSpec
from edgetwin.sim.crowd.candidates import make_index
from edgetwin.sim.crowd.costs import (
    aggregation_ms,
    blob_bytes,
    task_input_bytes,
    task_output_bytes,
)
from edgetwin.sim.crowd.phone import Load, OutOfMemory, Phone
from edgetwin.sim.crowd.records import Recorder
from edgetwin.sim.crowd.tasks import Job, TaskRecord, TaskState, unblocked_by
from edgetwin.sim.device import DeviceLeft


class Foreman:
    """Owns the jobs and the phones' work; every decision is taken here."""

    def __init__(
        self,
        env: simpy.Environment,
        spec: CrowdJobSpec,
        mode: str,
        scheduler: Scheduler,
        phones: Sequence[Phone],
        rng: np.random.Generator,
        recorder: Recorder,
        on_job_finished: Callable[[Job], None],
    ) -> None:
        self.env = env
        self.spec = spec
        self.mode = mode
        self.scheduler = scheduler
        self.phones = list(phones)
        self.rng = rng
        self.recorder = recorder
        self.on_job_finished = on_job_finished
        self.jobs: list[Job] = []
        self.pending: list[tuple[int, TaskRecord]] = []  # (seq, task), oldest first
        self._seq = count()
        self._joined = count()
        stage_views = [TaskView(stage.name, stage.name, stage.ram_mb) for stage in spec.stages]
        self.index = make_index(scheduler.name, self.phones, stage_views)
        self._broadcast_targets: set[str] = set()  # idle phones without the first stage resident
        for phone in self.phones:
            phone.device.on_leave.append(partial(self._phone_left, phone))
            phone.device.on_rejoin.append(partial(self._phone_joined, phone))
            if phone.device.up:
                phone.joined_order = next(self._joined)
            self._refresh(phone)

    # ------------------------------------------------------------ jobs
    def submit(self) -> Job:
        """A new job: queue its first stage and broadcast the first partition."""
        job = Job.create(len(self.jobs), self.spec, self.env.now)
        self.jobs.append(job)
        self.recorder.event("foreman", "submit", job.job_id)
        for item in range(self.spec.inputs):
            self._enqueue(job.tasks[item][0])
        first = self.spec.stages[0]
        targets = sorted(
            self._broadcast_targets, key=lambda name: self.index.phones[name].joined_order
        )
        for name in targets:
            self._start(
                self.index.phones[name],
                self._load_for(self.index.phones[name], first, job, broadcast=True),
            )
        self._dispatch()
        return job

    @staticmethod
    def _wants(phone: Phone, stage: StageSpec) -> bool:
        """Whether an idle phone should be sent a load instruction for ``stage``."""
        return phone.available and phone.resident is not stage and stage.name not in phone.banned

    def _enqueue(self, task: TaskRecord) -> None:
        if task.seq < 0:
            task.seq = next(self._seq)
        task.state = TaskState.READY
        bisect.insort(self.pending, (task.seq, task), key=lambda entry: entry[0])

    def _dispatch(self) -> None:
        """Give queued tasks, oldest first, to the workers the scheduler picks."""
        waiting = []
        for entry in self.pending:
            task = entry[1]
            if not self.index.available:
                waiting.append(entry)
                continue
            shown = self.index.shortlist(task.view, self.rng)
            choice = self.scheduler.choose(task.view, shown, self.rng) if shown else None
            if choice is None:
                waiting.append(entry)
                continue
            phone = self.index.phones[choice]
            phone.tasks_assigned += 1
            task.state, task.worker = TaskState.RUNNING, phone.name
            self._join(task.job, phone)
            self.recorder.event(phone.name, "assign", task.job.job_id, task.item, task.stage.name)
            self._start(phone, self._run_task(phone, task))
        self.pending = waiting

    # ------------------------------------------------------------ work on phones
    def _start(self, phone: Phone, work: Generator[simpy.Event, object, None]) -> None:
        phone.busy = True
        phone.process = self.env.process(work)
        self._refresh(phone)

    def _finish(self, phone: Phone) -> None:
        phone.device.enter("idle")
        phone.busy = False
        phone.process = None
        self._refresh(phone)

    def _run_task(self, phone: Phone, task: TaskRecord) -> Generator[simpy.Event, object, None]:
        job, s = task.job, task.stage_index
        ids = (job.job_id, task.item, task.stage.name)
        try:
            load = yield from phone.make_resident(task.stage, *ids[:2])
            task.load_ms = self._count_load(job, phone, load, task.stage)
            comm_ms = yield from phone.transfer(task_input_bytes(self.spec, s), "in", *ids)
            task.infer_ms = yield from phone.infer(task.stage, *ids[:2])
            job.gflops += task.stage.gflops
            out_bytes = task_output_bytes(self.spec, s)
            task.comm_ms = comm_ms + (yield from phone.transfer(out_bytes, "out", *ids))
            job.bytes_sent += out_bytes
            job.bytes_moved += task_input_bytes(self.spec, s) + out_bytes
        except simpy.Interrupt:
            self._requeue(task, phone, "lost")
            self._finish(phone)
            self._dispatch()
            return
        except OutOfMemory:
            phone.banned.add(task.stage.name)
            self._requeue(task, phone, "rescheduled")
            self._finish(phone)
            self._dispatch()
            return
        released = self._complete(task, phone)
        self._finish(phone)
        self._dispatch()
        if released is not None and self._wants(phone, released):
            self._start(phone, self._load_for(phone, released, job, broadcast=False))

    def _load_for(
        self, phone: Phone, stage: StageSpec, job: Job, broadcast: bool
    ) -> Generator[simpy.Event, object, None]:
        """A load instruction: the eager broadcast, or a released stage's deferred load."""
        self._join(job, phone)
        self.recorder.event(
            phone.name, "broadcast" if broadcast else "deferred_load", job.job_id, None, stage.name
        )
        try:
            load = yield from phone.make_resident(stage, job.job_id, None)
            loaded_ms = self._count_load(job, phone, load, stage)
            if broadcast:
                job.broadcast_load_ms[phone.name] = loaded_ms
        except simpy.Interrupt:
            pass
        except OutOfMemory:
            phone.banned.add(stage.name)
        self._finish(phone)
        self._dispatch()

    def _count_load(self, job: Job, phone: Phone, load: Load | None, stage: StageSpec) -> float:
        if load is None:
            job.peak_rss_mb = max(job.peak_rss_mb, stage.ram_mb)
            return 0.0
        job.cold_loads += load.cold
        job.warm_loads += not load.cold
        job.evictions += load.evicted
        job.peak_rss_mb = max(job.peak_rss_mb, load.peak_mb)
        if load.cold:
            job.bytes_moved += round(blob_bytes(stage))
        return load.duration_ms

    def _requeue(self, task: TaskRecord, phone: Phone, why: str) -> None:
        self.recorder.event(phone.name, why, task.job.job_id, task.item, task.stage.name)
        task.job.redispatched += 1
        task.worker = None
        self._enqueue(task)

    def _complete(self, task: TaskRecord, phone: Phone) -> StageSpec | None:
        """The dependency manager: record the result, queue what it unblocks.

        Returns the stage this completion released, if it released one.
        """
        job, s = task.job, task.stage_index
        assert task.state is TaskState.RUNNING and task.worker == phone.name
        task.state, task.done_ms = TaskState.DONE, self.env.now
        phone.tasks_done += 1
        job.done_per_stage[s] += 1
        self.recorder.event(phone.name, "done", job.job_id, task.item, task.stage.name)
        released = None
        if s + 1 < job.stages and not job.released[s + 1]:
            job.released[s + 1] = True
            released = job.spec.stages[s + 1]
            self.recorder.event("foreman", "release", job.job_id, None, released.name)
        for unblocked in unblocked_by(task, self.mode):
            self._enqueue(unblocked)
        if s + 1 == job.stages:
            job.items_done += 1
            if job.items_done == job.spec.inputs:
                self.env.process(self._aggregate(job))
        return released

    def _aggregate(self, job: Job) -> Generator[simpy.Event, object, None]:
        self.recorder.event("foreman", "aggregate", job.job_id)
        yield self.env.timeout(aggregation_ms(self.spec))
        job.finished_ms = self.env.now
        for name, start_j in job.energy_start_j.items():
            job.energy_j[name] = self.index.phones[name].energy_j() - start_j
        self.recorder.event("foreman", "finished", job.job_id)
        self.on_job_finished(job)

    def _join(self, job: Job, phone: Phone) -> None:
        """``phone`` takes part in ``job`` from now on (its energy counts from here)."""
        if phone.name not in job.energy_start_j:
            job.energy_start_j[phone.name] = phone.energy_j()

    # ------------------------------------------------------------ churn
    def _refresh(self, phone: Phone) -> None:
        phone.view = phone.make_view()
        self.index.update(phone)
        if self._wants(phone, self.spec.stages[0]):
            self._broadcast_targets.add(phone.name)
        else:
            self._broadcast_targets.discard(phone.name)

    def _phone_left(self, phone: Phone, cause: DeviceLeft) -> None:
        phone.lose_session()
        phone.away_since_ms = self.env.now
        self.recorder.event(phone.name, "left", stage=cause.reason)
        process = phone.process
        if process is not None and process.is_alive and process is not self.env.active_process:
            process.interrupt(cause)
        self._refresh(phone)

    def _phone_joined(self, phone: Phone) -> None:
        if phone.away_since_ms is not None:
            self.recorder.activity(phone.name, "away", phone.away_since_ms)
        phone.away_since_ms = None
        phone.joined_order = next(self._joined)
        self.recorder.event(phone.name, "joined")
        self._refresh(phone)
        self._dispatch()
