"""The task table of a pipeline job and its two dependency rules.

A job of N inputs through S stages has N x S tasks; task (i, s) runs stage s
on input i. Streaming: (i, s+1) becomes ready when (i, s) is done. Barrier:
every task of stage s+1 becomes ready when the whole of stage s is done.
Stage s+1 is *released* (its loads may be sent ahead of its tasks, JIT) at
the first completion in stage s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

import numpy as np

from edgetwin.models.crowd.views import Scheduler

Mode = Literal["streaming", "barrier"]


@dataclass(frozen=True, slots=True)
class Stage:
    """A stage as the core knows it; ``key`` identifies it across jobs (residency carries
    over between jobs that share a key): a name in the twin, name and SHA-256 in the real
    foreman (``dispatch.stage_key``)."""

    key: str
    name: str
    ram_mb: float


class TaskState(Enum):
    WAITING = "waiting"  # an upstream task is not done yet
    READY = "ready"  # queued for a worker
    RUNNING = "running"  # given to a worker
    DONE = "done"


def task_id(job_label: str, item: int, stage: str) -> str:
    """A task's id in logs and scheduler views: ``job-1/i0/cell_a``."""
    return f"{job_label}/i{item}/{stage}"


@dataclass(eq=False, slots=True)
class Task:
    """One input through one stage; ``load_ms``, ``infer_ms``, ``comm_ms`` are what its
    successful attempt cost, as the twin models it (the real foreman keeps the worker's
    report and sets ``load_ms`` only: ``waited_load_ms`` of the load the report gives)."""

    job: Job
    item: int
    stage_index: int
    state: TaskState = TaskState.WAITING
    seq: int = -1  # queue order: the order tasks first became ready
    worker: str | None = None
    attempts: int = 0  # times it was given to a worker
    failures: int = 0  # attempts that failed on a worker that stayed
    ready_ms: float = 0.0
    dispatch_ms: float = 0.0
    done_ms: float = 0.0
    load_ms: float = 0.0
    infer_ms: float = 0.0
    comm_ms: float = 0.0

    @property
    def stage(self) -> Stage:
        return self.job.stages[self.stage_index]

    @property
    def task_id(self) -> str:
        return task_id(self.job.label, self.item, self.stage.name)


def waited_load_ms(load_ms: float, load_end_ms: float, ready_ms: float) -> float:
    """The part of a load (``load_ms`` long, over at ``load_end_ms``) that a task ready since
    ``ready_ms`` waited for: a load begun earlier (a JIT load while the input's previous
    stage ran, a broadcast for an earlier job) counts only from ``ready_ms``."""
    return min(load_ms, max(0.0, load_end_ms - ready_ms))


@dataclass(eq=False)
class Job:
    """A submitted job's tasks and progress."""

    job_id: int
    label: str
    mode: Mode
    stages: tuple[Stage, ...]
    inputs: int
    submitted_ms: float
    scheduler: Scheduler  # picks the workers of its tasks
    rng: np.random.Generator  # the scheduler's random stream
    tasks: list[list[Task]] = field(default_factory=list)  # [item][stage]
    done_per_stage: list[int] = field(default_factory=list)
    unassigned: list[int] = field(default_factory=list)  # per stage: not given to a worker yet
    released: list[bool] = field(default_factory=list)
    items_done: int = 0
    requeued: int = 0
    index_of: dict[str, int] = field(default_factory=dict)  # stage key -> stage index

    def __post_init__(self) -> None:
        count = len(self.stages)
        self.index_of = {stage.key: s for s, stage in enumerate(self.stages)}
        self.tasks = [[Task(self, i, s) for s in range(count)] for i in range(self.inputs)]
        self.done_per_stage = [0] * count
        self.unassigned = [self.inputs] * count
        self.released = [s == 0 for s in range(count)]

    @property
    def all_done(self) -> bool:
        """Whether the last stage of every input is done."""
        return self.items_done == self.inputs

    def wants(self, key: str) -> bool:
        """Whether stage ``key`` is released here and has tasks not given to a worker yet."""
        s = self.index_of.get(key)
        return s is not None and self.released[s] and self.unassigned[s] > 0

    def unblocked_by(self, task: Task) -> list[Task]:
        """Tasks that become ready now that ``task`` is done (already counted)."""
        s = task.stage_index
        if s + 1 == len(self.stages):
            return []
        if self.mode == "streaming":
            return [self.tasks[task.item][s + 1]]
        if self.done_per_stage[s] == self.inputs:
            return [tasks[s + 1] for tasks in self.tasks]
        return []
