"""The foreman's view of its workers, and the two placement decisions it makes.

``assignments``: ready tasks, oldest first, each offered to the scheduler with the
idle workers (a policy from ``edgetwin.policies.scheduling``; stages are keyed by
their SHA-256, so residency carries over between jobs that share a stage).
``prefetches``: JIT loading. A stage's load instruction is released when the first
task upstream of it completes; from then on, an idle worker whose own stage has no
work left loads a released stage that has more unassigned tasks than holders.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from edgetwin.emu.crowdio.records import WorkerStatus, task_id
from edgetwin.emu.crowdio.tasks import TaskKey, TaskTable
from edgetwin.policies.scheduling import Scheduler, TaskView, WorkerView


@dataclass(frozen=True)
class JobStage:
    """A stage as the foreman keeps it for one job."""

    index: int
    name: str
    sha256: str
    blob_b64: str
    blob_bytes: int
    ram_mb: float


@dataclass
class WorkerState:
    """What the foreman knows of one enrolled worker."""

    worker_id: str
    joined_order: int
    has_gpu: bool
    status: WorkerStatus
    cached: set[str] = field(default_factory=set)  # SHA-256 of blobs on its disk
    resident_sha: str | None = None  # the stage in (or queued into) its session
    resident_name: str | None = None
    task: TaskKey | None = None  # the task it is running, if any
    assigned: int = 0
    completed: int = 0

    @property
    def success_rate(self) -> float:
        """Completed over assigned; 1.0 before any task."""
        return self.completed / self.assigned if self.assigned else 1.0

    def view(self) -> WorkerView:
        """The scheduler's snapshot of this worker."""
        return WorkerView(
            worker_id=self.worker_id,
            resident_stage=self.resident_sha,
            cached_stages=frozenset(self.cached),
            free_ram_mb=self.status.free_ram_mb,
            battery_pct=self.status.battery_pct,
            success_rate=self.success_rate,
            has_gpu=self.has_gpu,
            tasks_done=self.completed,
            joined_order=self.joined_order,
        )


def assignments(
    job_id: str,
    table: TaskTable,
    stages: Sequence[JobStage],
    workers: Sequence[WorkerState],
    scheduler: Scheduler,
    rng: np.random.Generator,
) -> list[tuple[TaskKey, WorkerState]]:
    """Ready tasks matched to idle workers by the scheduler (a task it declines waits)."""
    idle = sorted((w for w in workers if w.task is None), key=lambda w: w.joined_order)
    chosen: list[tuple[TaskKey, WorkerState]] = []
    for key in table.ready():
        if not idle:
            break
        stage = stages[key[1]]
        view = TaskView(task_id(job_id, key[0], stage.name), stage.sha256, stage.ram_mb)
        worker_id = scheduler.choose(view, [w.view() for w in idle], rng)
        if worker_id is None:
            continue
        worker = next(w for w in idle if w.worker_id == worker_id)
        idle.remove(worker)
        chosen.append((key, worker))
    return chosen


def prefetches(
    table: TaskTable,
    released: set[int],
    stages: Sequence[JobStage],
    workers: Sequence[WorkerState],
) -> list[tuple[WorkerState, int]]:
    """Idle workers with nothing left to do on their stage, each with a released stage to load."""
    index_of = {stage.sha256: stage.index for stage in stages}
    holders = Counter(w.resident_sha for w in workers)
    chosen: list[tuple[WorkerState, int]] = []
    for worker in sorted(workers, key=lambda w: w.joined_order):
        current = index_of.get(worker.resident_sha or "")
        if worker.task is not None or (current is not None and table.unassigned(current) > 0):
            continue
        for index in (i for i in sorted(released) if i != current):
            sha = stages[index].sha256
            if table.unassigned(index) > holders[sha]:
                holders[sha] += 1
                holders[worker.resident_sha] -= 1
                chosen.append((worker, index))
                break
    return chosen
