"""Task-to-worker scheduling policies for pipelined jobs (CROWDio).

One interface for the crowd twin and the real foreman: a scheduler sees a
task waiting for a worker and a snapshot of the workers that could take it
now, and names one (or none: the task waits). Schedulers are registered by
name and selected by name in YAML.

The affinity scheduler prefers, in order of residency tier: a worker with
the task's stage resident in its session, one with the stage cached on
storage, an idle worker with nothing resident, and last a worker that must
evict another stage. Within a tier it takes the best-scored worker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar, Protocol

import numpy as np


class Tier(IntEnum):
    """Residency tier of a worker for a stage: lower is better."""

    RESIDENT = 0
    CACHED = 1
    IDLE = 2
    EVICT = 3


@dataclass(frozen=True)
class WorkerView:
    """What a scheduler may know of a worker at the moment it decides."""

    worker_id: str
    resident_stage: str | None
    cached_stages: frozenset[str]
    free_ram_mb: float
    battery_pct: float | None  # None: mains powered
    success_rate: float  # completed / assigned, 1.0 before any task
    has_gpu: bool
    tasks_done: int
    joined_order: int  # position in the order workers joined


@dataclass(frozen=True)
class TaskView:
    """A task waiting for a worker."""

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


def fits(task: TaskView, worker: WorkerView) -> bool:
    """Whether the stage can be made resident (a resident stage is unloaded first)."""
    return worker.resident_stage == task.stage or worker.free_ram_mb >= task.stage_ram_mb


class Scheduler(Protocol):
    """Picks a worker id among ``available`` for ``task``, or None to keep it waiting."""

    name: ClassVar[str]

    def choose(
        self, task: TaskView, available: Sequence[WorkerView], rng: np.random.Generator
    ) -> str | None: ...


def _best(
    task: TaskView, available: Sequence[WorkerView], key: Callable[[WorkerView], Any]
) -> str | None:
    """The worker with the smallest ``key`` among those the task fits on, or None."""
    candidates = [w for w in available if fits(task, w)]
    return min(candidates, key=key).worker_id if candidates else None


class AffinityScheduler:
    """Four-tier affinity: resident, cached, idle, evict; best health score within a tier."""

    name: ClassVar[str] = "affinity"

    def choose(
        self, task: TaskView, available: Sequence[WorkerView], rng: np.random.Generator
    ) -> str | None:
        return _best(task, available, lambda w: (tier(task, w), -health_score(w), w.joined_order))


class FifoScheduler:
    """First available worker in the order workers joined."""

    name: ClassVar[str] = "fifo"

    def choose(
        self, task: TaskView, available: Sequence[WorkerView], rng: np.random.Generator
    ) -> str | None:
        return _best(task, available, lambda w: w.joined_order)


class RandomScheduler:
    """A uniformly random available worker."""

    name: ClassVar[str] = "random"

    def choose(
        self, task: TaskView, available: Sequence[WorkerView], rng: np.random.Generator
    ) -> str | None:
        candidates = [w for w in available if fits(task, w)]
        return candidates[int(rng.integers(len(candidates)))].worker_id if candidates else None


class LeastLoadedScheduler:
    """The available worker that has done the fewest tasks so far."""

    name: ClassVar[str] = "least_loaded"

    def choose(
        self, task: TaskView, available: Sequence[WorkerView], rng: np.random.Generator
    ) -> str | None:
        return _best(task, available, lambda w: (w.tasks_done, w.joined_order))


SCHEDULERS: dict[str, Callable[[], Scheduler]] = {
    cls.name: cls
    for cls in (AffinityScheduler, FifoScheduler, RandomScheduler, LeastLoadedScheduler)
}


def make_scheduler(name: str) -> Scheduler:
    """A scheduler by its registered name (KeyError names the known ones)."""
    if name not in SCHEDULERS:
        raise KeyError(f"unknown scheduler {name!r}; known: {sorted(SCHEDULERS)}")
    return SCHEDULERS[name]()
