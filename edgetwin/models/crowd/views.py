"""What an assignment decision sees: a task, the workers, their residency tier.

These are the pure definitions the schedulers of ``edgetwin.policies.scheduling``
are written against; the decision core passes a scheduler in and never imports
it. A scheduler that picks the fitting worker with the smallest ``rank`` says
so by having a ``rank`` method; one that draws uniformly sets ``uniform``. The
core then shows it a short list from an index instead of every idle worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import ClassVar, NamedTuple, Protocol

import numpy as np


class Tier(IntEnum):
    """Residency tier of a worker for a stage: lower is better."""

    RESIDENT = 0
    CACHED = 1
    IDLE = 2
    EVICT = 3


class WorkerView(NamedTuple):
    """What a scheduler may know of a worker at the moment it decides (a named tuple: one is
    built for every idle worker at every change, cheaper than a frozen dataclass)."""

    worker_id: str
    resident_stage: str | None
    cached_stages: frozenset[str]
    free_ram_mb: float
    battery_pct: float | None  # None: mains powered
    success_rate: float  # completed / assigned, 1.0 before any task
    has_gpu: bool
    tasks_done: int
    joined_order: int  # position in the order workers joined


class TaskView(NamedTuple):
    """A task waiting for a worker (``stage`` is the stage's key)."""

    task_id: str
    stage: str
    stage_ram_mb: float


def tier(task: TaskView, worker: WorkerView) -> Tier:
    """Residency tier of ``worker`` for ``task``'s stage."""
    if worker.resident_stage == task.stage:
        return Tier.RESIDENT
    if task.stage in worker.cached_stages:
        return Tier.CACHED
    if worker.resident_stage is None:
        return Tier.IDLE
    return Tier.EVICT


def health_score(worker: WorkerView) -> float:
    """Higher is better: success rate first, then battery, RAM headroom and a GPU."""
    battery = 1.0 if worker.battery_pct is None else worker.battery_pct / 100.0
    ram = min(worker.free_ram_mb / 4096.0, 1.0)
    return 4.0 * worker.success_rate + 2.0 * battery + ram + (0.5 if worker.has_gpu else 0.0)


def session_fits(need_mb: float, free_ram_mb: float) -> bool:
    """Whether a session that needs ``need_mb`` of RAM fits in ``free_ram_mb``: the one rule
    of the core's ``fits`` and of the fleet check that a phone class can hold a stage
    (``edgetwin.crowd_fleet``)."""
    return free_ram_mb >= need_mb


def fits(task: TaskView, worker: WorkerView) -> bool:
    """Whether the stage can be made resident (a resident stage is unloaded first)."""
    return worker.resident_stage == task.stage or session_fits(
        task.stage_ram_mb, worker.free_ram_mb
    )


class Scheduler(Protocol):
    """Picks a worker id among ``available`` for ``task``, or None to keep it waiting."""

    name: ClassVar[str]

    def choose(
        self, task: TaskView, available: Sequence[WorkerView], rng: np.random.Generator
    ) -> str | None: ...
