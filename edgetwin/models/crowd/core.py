"""The crowd foreman's decisions, free of I/O and of SimPy: one core for the twin and
the real foreman.

The runtime tells the core what happened (a worker joined, left, reported, a
task completed or failed, a load did not fit) and executes the orders it
returns (``Load``: UNLOAD the held stage, then LOAD; ``Run``: RUN_TASK), in
order, each worker handling its own in order. The core decides:

- on submission, the task table and the broadcast of the first stage to every
  idle worker that does not hold it;
- assignment: ready tasks, oldest first, each to the worker the scheduler
  picks from an index's short list (``index``); a worker that does not hold
  the task's stage is sent a ``Load`` first;
- the dependency manager (streaming or barrier, ``table``), stage release and
  JIT loading (``jit``), and when a job is done (time to aggregate);
- requeue: a task whose worker left, or whose attempt failed, goes back to the
  queue **in its original order** (the order it first became ready), not to
  the front. A loss then reorders nothing: the queue is the one the job would
  have had without it, older tasks (of any job) keep their precedence, and a
  worker that keeps failing one task cannot push that task ahead of the rest.
- a worker whose load of a stage failed lastingly (it does not fit) is not
  offered that stage again.
- the per-task deadline (``task_deadline_ms``; None, the default: none): a task still
  running that long after its dispatch is overdue; its worker leaves (a worker that
  beats but never answers, a hung inference, held its task for ever) and the task goes
  back to the queue (why ``overdue``). The runtime cuts the worker off (``expire``).

Several jobs may be in flight, each with its scheduler and random stream;
their tasks share one queue (oldest first) and the JIT counts are summed by
stage key.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterable, Sequence
from itertools import count
from typing import NamedTuple

import numpy as np

from edgetwin.models.crowd.events import Decision, Kind, LoadWhy, RequeueWhy
from edgetwin.models.crowd.index import CandidateIndex, HeldGroups, make_index
from edgetwin.models.crowd.jit import StageCounts
from edgetwin.models.crowd.table import Job, Mode, Stage, Task, TaskState
from edgetwin.models.crowd.views import Scheduler, TaskView
from edgetwin.models.crowd.workers import Facts, Worker


class Load(NamedTuple):
    """UNLOAD_MODEL of ``evicts`` (if any), then LOAD_MODEL of ``stage`` on ``worker``
    (orders are named tuples: cheaper to build than frozen dataclasses)."""

    worker: str
    stage: Stage
    evicts: Stage | None  # the stage it held
    job: Job
    item: int | None  # the task it is loaded for; None: the broadcast or a JIT load
    why: LoadWhy


class Run(NamedTuple):
    """RUN_TASK of ``task`` on ``worker``."""

    worker: str
    task: Task


Order = Load | Run


class CrowdCore:
    """Jobs, workers and every decision; ``facts`` reads what only the runtime knows."""

    def __init__(
        self,
        facts: Callable[[str], Facts],
        on_decision: Callable[[Decision], None] | None = None,
        task_deadline_ms: float | None = None,
    ) -> None:
        self.facts = facts
        self.on_decision = on_decision
        self.task_deadline_ms = task_deadline_ms
        self.workers: dict[str, Worker] = {}
        self.idle: set[str] = set()  # connected workers without a task
        self.indexes: dict[str, CandidateIndex] = {}  # per scheduler name
        self.groups = HeldGroups(self.workers)
        self.stages: dict[str, Stage] = {}  # by key, in the order first seen
        self.counts = StageCounts()
        self.queues: dict[str, list[tuple[int, Task]]] = {}  # per stage key, by seq
        self.submitted = 0  # jobs so far (the next job's id)
        self.in_flight: list[Job] = []  # submitted, not all done, oldest first
        self._seq = count()
        self._joined = count()

    # ------------------------------------------------------------ workers
    def register(self, stages: Sequence[Stage]) -> None:
        """Know these stages (a job's, before it is submitted, or all of them up front)."""
        for stage in stages:
            if stage.key not in self.stages:
                self.stages[stage.key] = stage
                self.counts.add_stage(stage.key)
                self.queues[stage.key] = []
                for index in self.indexes.values():
                    index.add_stage(self._stage_view(stage))

    def join(self, worker_id: str) -> Worker:
        """A worker connected (or came back, holding nothing): last in join order."""
        worker = self.workers.get(worker_id)
        if worker is None:
            worker = self.workers[worker_id] = Worker(worker_id, next(self._joined))
        else:
            worker.connected, worker.joined_order = True, next(self._joined)
        self.refresh(worker_id)
        return worker

    def leave(self, worker_id: str) -> None:
        """A worker is gone (its session with it); its task, if any, waits for ``requeue``."""
        worker = self.workers[worker_id]
        worker.connected = False
        self._hold(worker, None)
        self.refresh(worker_id)

    def forget(self, worker_id: str) -> None:
        """A worker that left will not come back under this id (the real foreman's rule):
        drop its record. Its task must have been requeued."""
        worker = self.workers[worker_id]
        assert not worker.connected and worker.task is None
        del self.workers[worker_id]

    def refresh(self, worker_id: str) -> None:
        """Re-index the worker; an idle one's facts are read again (a busy one is shown to no
        scheduler, so its view waits until it is idle)."""
        worker = self.workers[worker_id]
        worker.version += 1
        if worker.available:
            worker.view = worker.make_view(self.facts(worker_id))
            self.idle.add(worker_id)
        else:
            self.idle.discard(worker_id)
        for index in self.indexes.values():
            index.update(worker)
        self.groups.update(worker)

    def load_failed(self, worker_id: str, key: str, lasting: bool) -> None:
        """A stage's load failed there; a ``lasting`` failure (the session does not fit)
        means the worker is never offered that stage again."""
        worker = self.workers[worker_id]
        if lasting:
            worker.banned.add(key)
        if worker.held == key:
            self._hold(worker, None)
        self.refresh(worker_id)

    # ------------------------------------------------------------ jobs
    def submit(
        self,
        label: str,
        stages: Sequence[Stage],
        inputs: int,
        mode: Mode,
        scheduler: Scheduler,
        rng: np.random.Generator,
        now_ms: float,
    ) -> tuple[Job, list[Order]]:
        """A new job (id ``submitted``): queue its first stage, broadcast it, dispatch."""
        self.register(stages)
        self.add_scheduler(scheduler)
        job = Job(self.submitted, label, mode, tuple(stages), inputs, now_ms, scheduler, rng)
        self.submitted += 1
        self.in_flight.append(job)
        self._decide("submit", job)
        for s, stage in enumerate(job.stages):
            self.counts.add(stage.key, inputs, job.released[s])
        for tasks in job.tasks:
            self._enqueue(tasks[0], now_ms)
        orders: list[Order] = []
        first = job.stages[0]

        def broadcast(worker: Worker) -> bool:
            if first.key not in worker.banned:
                self._load(worker, first, job, None, "broadcast", orders)
                self.refresh(worker.worker_id)
            return True

        self.groups.visit([None, *(k for k in self.stages if k != first.key)], broadcast)
        return job, orders + self.dispatch(now_ms)

    def dispatch(self, now_ms: float) -> list[Order]:
        """Queued tasks, oldest first, to the workers the scheduler picks; then JIT loads."""
        orders: list[Order] = []
        heads = [(queue[0][0], key) for key, queue in self.queues.items() if queue]
        heapq.heapify(heads)
        cursor: dict[str, int] = {}
        while heads and self.idle:
            _, key = heapq.heappop(heads)
            queue, i = self.queues[key], cursor.get(key, 0)
            task = queue[i][1]
            job = task.job
            view = TaskView(task.task_id, key, task.stage.ram_mb)
            index = self.indexes[job.scheduler.name]
            shown = index.shortlist(view, job.rng)
            if not shown:
                continue  # no worker for this stage in this pass
            if index.shows_the_pick:
                choice: str | None = shown[0].worker_id
            else:
                choice = job.scheduler.choose(view, shown, job.rng)
            if choice is None:
                i += 1
            else:
                del queue[i]
                self._assign(task, self.workers[choice], now_ms, orders)
            cursor[key] = i
            if i < len(queue):
                heapq.heappush(heads, (queue[i][0], key))
        self._jit(orders)
        return orders

    def complete(self, worker_id: str, now_ms: float) -> Task:
        """The worker's task is done: record it, release the next stage, queue what is ready."""
        worker = self.workers[worker_id]
        task = worker.task
        assert task is not None and task.state is TaskState.RUNNING
        job, s = task.job, task.stage_index
        task.state, task.done_ms = TaskState.DONE, now_ms
        worker.done += 1
        job.done_per_stage[s] += 1
        self._decide("done", job, task.item, task.stage, worker_id)
        if s + 1 < len(job.stages) and not job.released[s + 1]:
            job.released[s + 1] = True
            self.counts.release(job.stages[s + 1].key, job.unassigned[s + 1])
            self._decide("release", job, stage=job.stages[s + 1])
        for unblocked in job.unblocked_by(task):
            self._enqueue(unblocked, now_ms)
        if s + 1 == len(job.stages):
            job.items_done += 1
            if job.all_done:
                self.in_flight.remove(job)
                self._decide("aggregate", job)
        worker.task = None
        self.refresh(worker_id)
        return task

    def requeue(self, worker_id: str, why: RequeueWhy) -> Task:
        """The worker's task goes back to the queue in its original order."""
        worker = self.workers[worker_id]
        task = worker.task
        assert task is not None
        worker.task = None
        job, s = task.job, task.stage_index
        self._decide("requeue", job, task.item, task.stage, worker_id, why)
        job.requeued += 1
        task.failures += why == "failed"
        job.unassigned[s] += 1
        self.counts.add(task.stage.key, 1, job.released[s])
        task.worker = None
        self._enqueue(task, task.ready_ms)
        self.refresh(worker_id)
        return task

    def due_ms(self, task: Task) -> float | None:
        """When a running ``task`` becomes overdue (``task_deadline_ms`` after its dispatch);
        None without a deadline."""
        if self.task_deadline_ms is None:
            return None
        return task.dispatch_ms + self.task_deadline_ms

    def expire(self, now_ms: float, worker_ids: Iterable[str] | None = None) -> list[str]:
        """Of ``worker_ids`` (None: every worker), those whose task is overdue at ``now_ms``
        (``due_ms`` reached), in join order: each leaves (``leave``) and its task goes back
        to the queue (why ``overdue``). The runtime cuts each off; one that enrols again
        ``join``s as a worker holding nothing."""
        named = self.workers.values() if worker_ids is None else map(self.workers.get, worker_ids)
        late = [
            worker
            for worker in named
            if worker is not None
            and worker.task is not None
            and (due_ms := self.due_ms(worker.task)) is not None
            and now_ms >= due_ms
        ]
        expired = []
        for worker in sorted(late, key=lambda w: w.joined_order):
            self.leave(worker.worker_id)
            self.requeue(worker.worker_id, "overdue")
            expired.append(worker.worker_id)
        return expired

    def drop(self, job: Job) -> None:
        """Forget an unfinished job: its queued tasks go, its workers are free."""
        if job in self.in_flight:
            self.in_flight.remove(job)
        for s, stage in enumerate(job.stages):
            self.counts.add(stage.key, -job.unassigned[s], job.released[s])
            job.unassigned[s] = 0
            self.queues[stage.key] = [e for e in self.queues[stage.key] if e[1].job is not job]
        for worker in self.workers.values():
            if worker.task is not None and worker.task.job is job:
                worker.task = None
                self.refresh(worker.worker_id)

    # ------------------------------------------------------------ inside
    def _stage_view(self, stage: Stage) -> TaskView:
        return TaskView(stage.key, stage.key, stage.ram_mb)

    def add_scheduler(self, scheduler: Scheduler) -> None:
        """Keep an index for ``scheduler`` from now on (done at a job's submission if not
        before; the twin does it up front so its index sees every change in order)."""
        if scheduler.name in self.indexes:
            return
        index = self.indexes[scheduler.name] = make_index(scheduler, self.workers)
        for stage in self.stages.values():
            index.add_stage(self._stage_view(stage))
        for worker in sorted(self.workers.values(), key=lambda w: w.joined_order):
            index.update(worker)

    def _enqueue(self, task: Task, now_ms: float) -> None:
        if task.seq < 0:
            task.seq = next(self._seq)
            task.ready_ms = now_ms
        task.state = TaskState.READY
        bisect.insort(self.queues[task.stage.key], (task.seq, task), key=lambda e: e[0])

    def _assign(self, task: Task, worker: Worker, now_ms: float, orders: list[Order]) -> None:
        job, s = task.job, task.stage_index
        worker.assigned += 1
        worker.task = task
        task.state, task.worker = TaskState.RUNNING, worker.worker_id
        task.attempts += 1
        task.dispatch_ms = now_ms
        job.unassigned[s] -= 1
        self.counts.add(task.stage.key, -1, job.released[s])
        if worker.held != task.stage.key:
            self._load(worker, task.stage, job, task.item, "task", orders)
        self._decide("assign", job, task.item, task.stage, worker.worker_id, task.attempts)
        orders.append(Run(worker.worker_id, task))
        self.refresh(worker.worker_id)

    def _jit(self, orders: list[Order]) -> None:
        """Idle workers with nothing left on their stage load a released stage short of
        holders."""
        if not self.counts.any_wanted():
            return

        def offer(worker: Worker) -> bool:
            key = self.counts.stage_to_load(worker.held, worker.banned)
            if key is None:
                return True
            job = next(j for j in self.in_flight if j.wants(key))
            self._load(worker, self.stages[key], job, None, "deferred_load", orders)
            self.refresh(worker.worker_id)
            return self.counts.any_wanted()

        groups = [None, *(k for k in self.stages if not self.counts.busy(k))]
        self.groups.visit(groups, offer)

    def _load(
        self,
        worker: Worker,
        stage: Stage,
        job: Job,
        item: int | None,
        why: LoadWhy,
        orders: list[Order],
    ) -> None:
        self._decide("load", job, item, stage, worker.worker_id, why)
        held = None if worker.held is None else self.stages[worker.held]
        orders.append(Load(worker.worker_id, stage, held, job, item, why))
        self._hold(worker, stage.key)

    def _hold(self, worker: Worker, key: str | None) -> None:
        """The stage the core sees on ``worker`` (resident or queued) is now ``key``."""
        self.counts.hold(worker.held, key)
        worker.held = key

    def _decide(
        self,
        kind: Kind,
        job: Job,
        item: int | None = None,
        stage: Stage | None = None,
        worker: str | None = None,
        detail: str | int | None = None,
    ) -> None:
        if self.on_decision is not None:
            name = None if stage is None else stage.name
            self.on_decision(Decision(kind, job.job_id, item, name, worker, detail))
