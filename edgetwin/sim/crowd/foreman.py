"""The twin's foreman: the crowd decision core (``edgetwin.models.crowd``) in SimPy.

The core takes every decision (task table, broadcast of the first stage,
assignment, release, JIT loads, requeue; docs/crowd.md); this module tells it
what happened on the simulated phones and carries out its orders. A phone
handles its instructions (``LoadStage``: UNLOAD + LOAD, ``RunTask``) in order,
in one SimPy process, as a worker handles its connection; a phone that is
still loading is seen as holding the stage it loads. A phone that leaves loses
its task, which the core queues again; a task whose session does not fit a
phone is queued again and that phone is not offered the stage again. With a
per-task deadline (the core's ``task_deadline_ms``, the scenario's
``crowd.task_deadline_s``) a phone whose task is still running then is cut off, as
the real foreman cuts off a worker: its task is queued again, its session and its
instructions are lost, and it enrols again at once, holding nothing. When the
last stage of every input is done the foreman aggregates the logits (its cost
is modelled) and the job is finished.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from functools import partial

import numpy as np
import simpy

from edgetwin.crowd_spec import CrowdJobSpec, StageSpec
from edgetwin.models.crowd.core import CrowdCore, Load, Order
from edgetwin.models.crowd.events import Decision, RequeueWhy
from edgetwin.models.crowd.table import Mode, Stage, Task
from edgetwin.models.crowd.views import Scheduler
from edgetwin.models.crowd.workers import Facts
from edgetwin.sim.crowd.costs import (
    aggregation_ms,
    blob_bytes,
    task_input_bytes,
    task_output_bytes,
)
from edgetwin.sim.crowd.phone import Load as LoadDone
from edgetwin.sim.crowd.phone import LoadStage, OutOfMemory, Phone, RunTask
from edgetwin.sim.crowd.records import Recorder
from edgetwin.sim.crowd.tasks import Job
from edgetwin.sim.device import DeviceLeft

TRACE_NAMES = {"submit": "submit", "assign": "assign", "release": "release", "done": "done"}


OUT_OF_TIME = "not finished by horizon_s + drain_s"  # why a job the run ended on was not done


class CutOff:
    """Why a phone's work was interrupted: its task ran past the deadline (``Foreman``)."""


def trace_name(d: Decision) -> tuple[str, str] | None:
    """(phone or "foreman", trace event name) a decision is recorded under; None: not recorded
    (a task's own load is seen in the phone's load events; aggregation when it starts)."""
    if d.kind in TRACE_NAMES:
        return d.worker or "foreman", TRACE_NAMES[d.kind]
    if (d.kind == "load" and d.detail != "task") or d.kind == "requeue":
        return str(d.worker), str(d.detail)
    return None


class Foreman:
    """SimPy around the decision core: phones' work, churn and aggregation."""

    def __init__(
        self,
        env: simpy.Environment,
        spec: CrowdJobSpec,
        mode: Mode,
        scheduler: Scheduler,
        phones: Sequence[Phone],
        rng: np.random.Generator,
        recorder: Recorder,
        on_job_finished: Callable[[Job], None],
        task_deadline_ms: float | None = None,
    ) -> None:
        self.env = env
        self.spec = spec
        self.mode = mode
        self.phones = {phone.name: phone for phone in phones}
        self.recorder = recorder
        self.on_job_finished = on_job_finished
        self.jobs: list[Job] = []
        self.specs = {stage.name: stage for stage in spec.stages}
        self.stages = tuple(Stage(s.name, s.name, s.ram_mb) for s in spec.stages)
        trace = self._trace if recorder.enabled else None
        self.scheduler, self.rng = scheduler, rng
        self.core = CrowdCore(self._facts, trace, task_deadline_ms)
        self.core.register(self.stages)
        self.core.add_scheduler(scheduler)
        for phone in phones:
            phone.device.on_leave.append(partial(self._phone_left, phone))
            phone.device.on_rejoin.append(partial(self._phone_joined, phone))
            if phone.device.up:
                self.core.join(phone.name)

    def tasks_done(self, phone: str) -> int:
        worker = self.core.workers.get(phone)
        return 0 if worker is None else worker.done

    # ------------------------------------------------------------ jobs
    def submit(self) -> Job:
        """A new job: the core queues it, broadcasts its first stage and dispatches."""
        label = f"j{len(self.jobs)}"
        core_job, orders = self.core.submit(
            label, self.stages, self.spec.inputs, self.mode, self.scheduler, self.rng, self.env.now
        )
        job = Job(core_job, self.spec)
        self.jobs.append(job)
        self._carry_out(orders)
        return job

    def _dispatch(self) -> None:
        self._carry_out(self.core.dispatch(self.env.now))

    def _carry_out(self, orders: list[Order]) -> None:
        for order in orders:
            phone = self.phones[order.worker]
            if isinstance(order, Load):
                job = self.jobs[order.job.job_id]
                spec = self.specs[order.stage.name]
                self._send(phone, job, LoadStage(spec, job, order.item, order.why))
            else:
                self._send(phone, self.jobs[order.task.job.job_id], RunTask(order.task))
                due_ms = self.core.due_ms(order.task)
                if due_ms is not None:
                    self.env.process(self._deadline(phone, order.task, due_ms))

    def _send(self, phone: Phone, job: Job, instruction: LoadStage | RunTask) -> None:
        """Put an instruction in the phone's inbox; start handling it if the phone is idle."""
        if phone.name not in job.energy_start_j:  # it takes part from now on
            job.energy_start_j[phone.name] = phone.energy_j()
        phone.inbox.append(instruction)
        if phone.process is None:
            phone.process = self.env.process(self._work(phone))

    def _facts(self, name: str) -> Facts:
        phone = self.phones[name]
        return Facts(
            phone.cached_stages, phone.budget_mb, phone.battery_pct(), phone.profile.has_gpu
        )

    def _trace(self, d: Decision) -> None:
        named = trace_name(d)
        if named is not None:
            self.recorder.event(*named, d.job, d.item, d.stage)

    def unfinished_reasons(self) -> dict[int, str]:
        """Why each unfinished job had not finished when the run stopped, by job id: no
        phone connected, a stage that no connected phone can hold, or time ran out."""
        connected = [worker for worker in self.core.workers.values() if worker.connected]
        if not connected:
            empty = sum(phone.device.drained for phone in self.phones.values())
            reason = f"no phone connected ({empty} of {len(self.phones)} with an empty battery)"
            return {job.job_id: reason for job in self.jobs if not job.finished}
        unfit = set.intersection(*(worker.banned for worker in connected))
        return {job.job_id: _unfinished_reason(job, unfit) for job in self.jobs if not job.finished}

    # ------------------------------------------------------------ work on phones
    def _work(self, phone: Phone) -> Generator[simpy.Event, object, None]:
        """The phone handles its inbox in order, as a worker handles its connection."""
        try:
            while phone.inbox:
                instruction = phone.inbox.popleft()
                if isinstance(instruction, LoadStage):
                    yield from self._load(phone, instruction)
                else:
                    yield from self._run(phone, instruction.task)
        except simpy.Interrupt as stop:
            phone.inbox.clear()
            phone.device.enter("idle")
            phone.process = None
            if self.core.workers[phone.name].task is not None:
                self._requeue(phone, "lost")
            if isinstance(stop.cause, CutOff):
                self._phone_joined(phone)
            return
        phone.device.enter("idle")
        phone.process = None

    def _load(self, phone: Phone, load: LoadStage) -> Generator[simpy.Event, object, None]:
        job, stage = load.job, load.stage
        if phone.resident is stage:  # what make_resident does then, without its generator
            phone.use(stage)
            done = None
        else:
            try:
                done = yield from phone.make_resident(stage, job.job_id, load.item)
            except OutOfMemory:
                self.core.load_failed(phone.name, stage.name, lasting=True)
                return
        phone.note_load(self._count_load(job, done, stage))
        if load.why == "broadcast":
            job.broadcast_load_ms[phone.name] = phone.last_load_ms

    def _run(self, phone: Phone, task: Task) -> Generator[simpy.Event, object, None]:
        job, s = self.jobs[task.job.job_id], task.stage_index
        stage = self.spec.stages[s]
        if phone.resident is not stage:  # its load did not fit: the task fails there
            self._requeue(phone, "rescheduled")
            return
        ids = (job.job_id, task.item, stage.name)
        phone.use(stage)
        job.peak_session_mb = max(job.peak_session_mb, stage.ram_mb)
        task.load_ms = phone.take_load_ms(task.ready_ms)
        in_bytes = task_input_bytes(self.spec, s)
        comm_ms = yield from phone.transfer(in_bytes, "in", *ids)
        task.infer_ms = yield from phone.infer(stage, *ids[:2])
        job.gflops += stage.gflops
        out_bytes = task_output_bytes(self.spec, s)
        task.comm_ms = comm_ms + (yield from phone.transfer(out_bytes, "out", *ids))
        job.bytes_sent += out_bytes
        job.bytes_moved += in_bytes + out_bytes
        self.core.complete(phone.name, self.env.now)
        if task.job.all_done:
            self.env.process(self._aggregate(job))
        self._dispatch()

    def _count_load(self, job: Job, load: LoadDone | None, stage: StageSpec) -> float:
        if load is None:
            return 0.0
        job.cold_loads += load.cold
        job.warm_loads += not load.cold
        job.evictions += load.evicted
        job.peak_session_mb = max(job.peak_session_mb, load.peak_mb)
        if load.cold:
            job.bytes_moved += round(blob_bytes(stage))
        return load.duration_ms

    def _requeue(self, phone: Phone, why: RequeueWhy) -> None:
        """The phone's task goes back to the queue (it left, or the stage did not fit)."""
        self.core.requeue(phone.name, why)
        self._dispatch()

    def _aggregate(self, job: Job) -> Generator[simpy.Event, object, None]:
        self.recorder.event("foreman", "aggregate", job.job_id)
        yield self.env.timeout(aggregation_ms(self.spec))
        job.finished_ms = self.env.now
        for name, start_j in job.energy_start_j.items():
            job.energy_j[name] = self.phones[name].energy_j() - start_j
        self.recorder.event("foreman", "finished", job.job_id)
        self.on_job_finished(job)

    def _deadline(
        self, phone: Phone, task: Task, due_ms: float
    ) -> Generator[simpy.Event, object, None]:
        """At ``due_ms``, cut the phone off if its task is overdue then (``CrowdCore.expire``:
        the task it holds then, this one unless it finished or was lost)."""
        yield self.env.timeout(due_ms - self.env.now)
        if not self.core.expire(self.env.now, [phone.name]):
            return
        phone.lose_session()
        self.recorder.event(phone.name, "cut_off", task.job.job_id, task.item, task.stage.name)
        process = phone.process
        if process is not None and process.is_alive:
            process.interrupt(CutOff())
        else:  # nothing to interrupt: it enrols again now
            self._phone_joined(phone)

    # ------------------------------------------------------------ churn
    def _phone_left(self, phone: Phone, cause: DeviceLeft) -> None:
        phone.lose_session()
        self.core.leave(phone.name)
        self.recorder.begin(phone.name, "away")
        self.recorder.event(phone.name, "left", stage=cause.reason)
        process = phone.process
        if process is not None and process.is_alive and process is not self.env.active_process:
            process.interrupt(cause)

    def _phone_joined(self, phone: Phone) -> None:
        self.recorder.end(phone.name, "away")
        self.core.join(phone.name)
        self.recorder.event(phone.name, "joined")
        self._dispatch()


def _unfinished_reason(job: Job, unfit: set[str]) -> str:
    """A stage with tasks left that fits no connected phone, else time."""
    core = job.core
    for s, stage in enumerate(core.stages):
        if core.done_per_stage[s] < core.inputs and stage.key in unfit:
            return f"stage {stage.name} did not fit any connected phone's RAM"
    return OUT_OF_TIME
