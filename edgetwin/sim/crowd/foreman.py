"""The foreman: job records, the dependency manager, dispatch, JIT loading and churn.

It takes the real foreman's decisions (``edgetwin.emu.crowdio.job`` and
``dispatch``), on simulated phones. On submission a job gets N x S task
records, its first-stage tasks are queued and the first stage is broadcast:
every connected phone without a task that does not hold it is sent its LOAD.
Queued tasks go, oldest first, to the phone the scheduler picks among the
connected phones without a task (see ``candidates``); a phone that is still
loading counts, and is seen as holding the stage it loads, as the real
foreman sees a worker whose LOAD is queued. A phone is sent UNLOAD + LOAD
when it does not hold the task's stage, then RUN_TASK, and handles them in
order. Later stages are released one by one, at the first completion of the
stage before, and loaded ahead of their tasks by the JIT rule of ``jit``. The
dependency manager injects each result into the tasks it unblocks (streaming
or barrier) and queues them. A phone that leaves loses its task, which is
queued again; a task whose session does not fit a phone is queued again and
that phone is not offered the stage again. When the last stage of every input
is done the foreman aggregates the logits (its cost is modelled) and the job
is finished.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Generator, Iterator, Sequence
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
from edgetwin.sim.crowd.jit import StageCounts
from edgetwin.sim.crowd.phone import Load, LoadStage, OutOfMemory, Phone, RunTask
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
        self.in_flight: list[Job] = []  # submitted and not finished, oldest first
        self.pending: list[tuple[int, TaskRecord]] = []  # (seq, task), oldest first
        self.counts = StageCounts(len(spec.stages))
        self.stage_index = {stage.name: k for k, stage in enumerate(spec.stages)}
        self._seq = count()
        self._joined = count()
        self._join_order: dict[str, Phone] = {}  # connected phones, first joined first
        stage_views = [TaskView(stage.name, stage.name, stage.ram_mb) for stage in spec.stages]
        self.index = make_index(scheduler.name, self.phones, stage_views)
        self._broadcast_targets: set[str] = set()  # no task, first stage not held
        for phone in self.phones:
            phone.device.on_leave.append(partial(self._phone_left, phone))
            phone.device.on_rejoin.append(partial(self._phone_joined, phone))
            if phone.device.up:
                phone.joined_order = next(self._joined)
                self._join_order[phone.name] = phone
            self._refresh(phone)

    # ------------------------------------------------------------ jobs
    def submit(self) -> Job:
        """A new job: queue its first stage, broadcast the first partition, dispatch."""
        job = Job.create(len(self.jobs), self.spec, self.env.now)
        self.jobs.append(job)
        self.in_flight.append(job)
        self.recorder.event("foreman", "submit", job.job_id)
        for s in range(job.stages):
            self.counts.add(s, self.spec.inputs, job.released[s])
        for item in range(self.spec.inputs):
            self._enqueue(job.tasks[item][0])
        first = self.spec.stages[0]
        for phone in list(self._in_join_order(self._broadcast_targets)):
            self._send_load(phone, LoadStage(first, job, None, "broadcast"))
        self._dispatch()
        return job

    def _enqueue(self, task: TaskRecord) -> None:
        if task.seq < 0:
            task.seq = next(self._seq)
        task.state = TaskState.READY
        bisect.insort(self.pending, (task.seq, task), key=lambda entry: entry[0])

    def _dispatch(self) -> None:
        """Queued tasks, oldest first, to the phones the scheduler picks; then JIT loads."""
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
            self._assign(task, self.index.phones[choice])
        self.pending = waiting
        self._jit_loads()

    def _assign(self, task: TaskRecord, phone: Phone) -> None:
        """UNLOAD + LOAD when the phone does not hold the task's stage, then RUN_TASK."""
        job, s = task.job, task.stage_index
        phone.tasks_assigned += 1
        phone.task = task
        task.state, task.worker = TaskState.RUNNING, phone.name
        job.unassigned[s] -= 1
        self.counts.add(s, -1, job.released[s])
        self.recorder.event(phone.name, "assign", job.job_id, task.item, task.stage.name)
        if phone.target is not task.stage:
            self._send_load(phone, LoadStage(task.stage, job, task.item, "task"))
        self._send(phone, job, RunTask(task))

    def _jit_loads(self) -> None:
        """Idle phones with nothing left on their stage load a released stage short of holders."""
        if not self.counts.any_wanted():
            return
        for phone in self._in_join_order(self.index.available):
            current = None if phone.target is None else self.stage_index[phone.target.name]
            banned = {self.stage_index[name] for name in phone.banned}
            stage = self.counts.stage_to_load(current, banned)
            if stage is not None:
                job = next(j for j in self.in_flight if j.released[stage] and j.unassigned[stage])
                self._send_load(
                    phone, LoadStage(self.spec.stages[stage], job, None, "deferred_load")
                )
                if not self.counts.any_wanted():
                    return

    def _in_join_order(self, names: set[str]) -> Iterator[Phone]:
        return (phone for name, phone in self._join_order.items() if name in names)

    # ------------------------------------------------------------ work on phones
    def _send_load(self, phone: Phone, load: LoadStage) -> None:
        if load.why != "task":
            self.recorder.event(phone.name, load.why, load.job.job_id, None, load.stage.name)
        self._hold(phone, load.stage)
        self._send(phone, load.job, load)

    def _send(self, phone: Phone, job: Job, instruction: LoadStage | RunTask) -> None:
        """Put an instruction in the phone's inbox; start handling it if the phone is idle."""
        self._join(job, phone)
        phone.inbox.append(instruction)
        if phone.process is None:
            phone.process = self.env.process(self._work(phone))
        self._refresh(phone)

    def _work(self, phone: Phone) -> Generator[simpy.Event, object, None]:
        """The phone handles its inbox in order, as a worker handles its connection."""
        try:
            while phone.inbox:
                instruction = phone.inbox.popleft()
                if isinstance(instruction, LoadStage):
                    yield from self._load(phone, instruction)
                else:
                    yield from self._run(phone, instruction.task)
        except simpy.Interrupt:
            phone.inbox.clear()
            phone.device.enter("idle")
            phone.process = None
            if phone.task is not None:
                self._requeue(phone, "lost")
            return
        phone.device.enter("idle")
        phone.process = None

    def _load(self, phone: Phone, load: LoadStage) -> Generator[simpy.Event, object, None]:
        job, stage = load.job, load.stage
        try:
            done = yield from phone.make_resident(stage, job.job_id, load.item)
        except OutOfMemory:
            phone.banned.add(stage.name)
            if phone.target is stage:
                self._hold(phone, None)
            self._refresh(phone)
            return
        phone.last_load_ms = self._count_load(job, phone, done, stage)
        if load.why == "broadcast":
            job.broadcast_load_ms[phone.name] = phone.last_load_ms

    def _run(self, phone: Phone, task: TaskRecord) -> Generator[simpy.Event, object, None]:
        job, s = task.job, task.stage_index
        if phone.resident is not task.stage:  # its load did not fit: the task fails there
            self._requeue(phone, "rescheduled")
            return
        ids = (job.job_id, task.item, task.stage.name)
        phone.use(task.stage)
        job.peak_rss_mb = max(job.peak_rss_mb, task.stage.ram_mb)
        task.load_ms, phone.last_load_ms = phone.last_load_ms, 0.0
        comm_ms = yield from phone.transfer(task_input_bytes(self.spec, s), "in", *ids)
        task.infer_ms = yield from phone.infer(task.stage, *ids[:2])
        job.gflops += task.stage.gflops
        out_bytes = task_output_bytes(self.spec, s)
        task.comm_ms = comm_ms + (yield from phone.transfer(out_bytes, "out", *ids))
        job.bytes_sent += out_bytes
        job.bytes_moved += task_input_bytes(self.spec, s) + out_bytes
        self._complete(task, phone)
        phone.task = None
        self._refresh(phone)
        self._dispatch()

    def _count_load(self, job: Job, phone: Phone, load: Load | None, stage: StageSpec) -> float:
        if load is None:
            return 0.0
        job.cold_loads += load.cold
        job.warm_loads += not load.cold
        job.evictions += load.evicted
        job.peak_rss_mb = max(job.peak_rss_mb, load.peak_mb)
        if load.cold:
            job.bytes_moved += round(blob_bytes(stage))
        return load.duration_ms

    def _requeue(self, phone: Phone, why: str) -> None:
        """The phone's task goes back to the queue (it left, or the stage did not fit)."""
        task = phone.task
        assert task is not None
        phone.task = None
        self.recorder.event(phone.name, why, task.job.job_id, task.item, task.stage.name)
        task.job.redispatched += 1
        task.job.unassigned[task.stage_index] += 1
        self.counts.add(task.stage_index, 1, task.job.released[task.stage_index])
        task.worker = None
        self._enqueue(task)
        self._refresh(phone)
        self._dispatch()

    def _complete(self, task: TaskRecord, phone: Phone) -> None:
        """The dependency manager: record a result, release the next stage, queue what is ready."""
        job, s = task.job, task.stage_index
        assert task.state is TaskState.RUNNING and task.worker == phone.name
        task.state, task.done_ms = TaskState.DONE, self.env.now
        phone.tasks_done += 1
        job.done_per_stage[s] += 1
        self.recorder.event(phone.name, "done", job.job_id, task.item, task.stage.name)
        if s + 1 < job.stages and not job.released[s + 1]:
            job.released[s + 1] = True
            self.counts.release(s + 1, job.unassigned[s + 1])
            self.recorder.event(
                "foreman", "release", job.job_id, None, self.spec.stages[s + 1].name
            )
        for unblocked in unblocked_by(task, self.mode):
            self._enqueue(unblocked)
        if s + 1 == job.stages:
            job.items_done += 1
            if job.items_done == job.spec.inputs:
                self.in_flight.remove(job)
                self.env.process(self._aggregate(job))

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

    # ------------------------------------------------------------ phones' state
    def _hold(self, phone: Phone, stage: StageSpec | None) -> None:
        """The stage the foreman sees on ``phone`` (resident or queued) is now ``stage``."""
        index = self.stage_index.get
        self.counts.hold(
            None if phone.target is None else index(phone.target.name),
            None if stage is None else index(stage.name),
        )
        phone.target = stage

    def _refresh(self, phone: Phone) -> None:
        phone.view = phone.make_view()
        self.index.update(phone)
        first = self.spec.stages[0]
        if phone.available and phone.target is not first and first.name not in phone.banned:
            self._broadcast_targets.add(phone.name)
        else:
            self._broadcast_targets.discard(phone.name)

    def _phone_left(self, phone: Phone, cause: DeviceLeft) -> None:
        phone.lose_session()
        self._hold(phone, None)
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
        self._join_order.pop(phone.name, None)
        self._join_order[phone.name] = phone
        self.recorder.event(phone.name, "joined")
        self._refresh(phone)
        self._dispatch()
