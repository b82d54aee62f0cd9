"""Task records of pipeline jobs and the two dependency modes.

A job of N inputs through S stages has N x S task records. Streaming: task
(i, s+1) becomes ready when (i, s) is done. Barrier: every task of stage s+1
becomes ready when the whole of stage s is done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from edgetwin.models.strategies.crowdio import CROWDIO_BARRIER, CROWDIO_STREAMING
from edgetwin.policies.scheduling import TaskView
from edgetwin.scenario import CrowdJobSpec, StageSpec

MODES = {CROWDIO_STREAMING: "streaming", CROWDIO_BARRIER: "barrier"}


class TaskState(Enum):
    WAITING = "waiting"  # an upstream task is not done yet
    READY = "ready"  # queued for a worker
    RUNNING = "running"
    DONE = "done"


@dataclass(eq=False)
class TaskRecord:
    """One input through one stage, and what its successful attempt cost."""

    job: Job
    item: int
    stage_index: int
    stage: StageSpec
    view: TaskView
    state: TaskState = TaskState.WAITING
    seq: int = -1  # dispatch order: the order tasks first became ready
    worker: str | None = None
    load_ms: float = 0.0
    infer_ms: float = 0.0
    comm_ms: float = 0.0
    done_ms: float = 0.0


@dataclass(eq=False)
class Job:
    """A submitted job: its tasks, progress and what it cost."""

    job_id: int
    spec: CrowdJobSpec
    submitted_ms: float
    tasks: list[list[TaskRecord]] = field(default_factory=list)  # [item][stage]
    done_per_stage: list[int] = field(default_factory=list)
    unassigned: list[int] = field(default_factory=list)  # per stage: not given to a phone yet
    released: list[bool] = field(default_factory=list)
    items_done: int = 0
    finished_ms: float | None = None
    energy_start_j: dict[str, float] = field(default_factory=dict)  # phone -> J at joining
    energy_j: dict[str, float] = field(default_factory=dict)  # phone -> J drawn for the job
    broadcast_load_ms: dict[str, float] = field(default_factory=dict)
    peak_rss_mb: float = 0.0
    gflops: float = 0.0
    cold_loads: int = 0
    warm_loads: int = 0
    evictions: int = 0
    redispatched: int = 0
    bytes_sent: int = 0
    bytes_moved: int = 0

    @classmethod
    def create(cls, job_id: int, spec: CrowdJobSpec, now_ms: float) -> Job:
        job = cls(job_id, spec, now_ms)
        stages = len(spec.stages)
        job.tasks = [
            [
                TaskRecord(
                    job,
                    item,
                    s,
                    stage,
                    TaskView(f"j{job_id}/i{item}/{stage.name}", stage.name, stage.ram_mb),
                )
                for s, stage in enumerate(spec.stages)
            ]
            for item in range(spec.inputs)
        ]
        job.done_per_stage = [0] * stages
        job.unassigned = [spec.inputs] * stages
        job.released = [s == 0 for s in range(stages)]
        return job

    @property
    def stages(self) -> int:
        return len(self.spec.stages)

    @property
    def finished(self) -> bool:
        return self.finished_ms is not None


def unblocked_by(task: TaskRecord, mode: str) -> list[TaskRecord]:
    """Tasks that become ready now that ``task`` is done (its stage count already counted)."""
    job, s = task.job, task.stage_index
    if s + 1 == job.stages:
        return []
    if mode == "streaming":
        return [job.tasks[task.item][s + 1]]
    if job.done_per_stage[s] == job.spec.inputs:
        return [job.tasks[item][s + 1] for item in range(job.spec.inputs)]
    return []
