"""Task-to-worker scheduling policies for pipelined jobs (CROWDio).

One interface for the crowd twin and the real foreman: a scheduler sees a
task waiting for a worker and a snapshot of the workers that could take it
now, and names one (or none: the task waits). Schedulers are registered by
name and selected by name in YAML.

The affinity scheduler prefers, in order of residency tier: a worker with
the task's stage resident in its session, one with the stage cached on
storage, an idle worker with nothing resident, and last a worker that must
evict another stage. Within a tier it takes the best-scored worker.

The views, tiers and the ``Scheduler`` protocol are the crowd decision core's
(``edgetwin.models.crowd.views``); a scheduler that picks the smallest ``rank``
says so, and the core shows it one worker from an index instead of every one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from edgetwin.errors import InputError
from edgetwin.models.crowd.views import (
    Scheduler,
    TaskView,
    Tier,
    WorkerView,
    fits,
    health_score,
    tier,
)

__all__ = [
    "SCHEDULERS",
    "Scheduler",
    "TaskView",
    "Tier",
    "WorkerView",
    "fits",
    "health_score",
    "make_scheduler",
    "tier",
]


def _best(
    task: TaskView, available: Sequence[WorkerView], key: Callable[[WorkerView], Any]
) -> str | None:
    """The worker with the smallest ``key`` among those the task fits on, or None."""
    candidates = [w for w in available if fits(task, w)]
    return min(candidates, key=key).worker_id if candidates else None


class _Ranked:
    """A scheduler that picks the fitting worker with the smallest ``rank``."""

    def rank(self, task: TaskView, worker: WorkerView) -> tuple[float, ...]:
        raise NotImplementedError

    def choose(
        self, task: TaskView, available: Sequence[WorkerView], rng: np.random.Generator
    ) -> str | None:
        return _best(task, available, lambda w: self.rank(task, w))


class AffinityScheduler(_Ranked):
    """Four-tier affinity: resident, cached, idle, evict; best health score within a tier."""

    name: ClassVar[str] = "affinity"

    def rank(self, task: TaskView, worker: WorkerView) -> tuple[float, ...]:
        return (tier(task, worker), -health_score(worker), worker.joined_order)


class FifoScheduler(_Ranked):
    """First available worker in the order workers joined."""

    name: ClassVar[str] = "fifo"

    def rank(self, task: TaskView, worker: WorkerView) -> tuple[float, ...]:
        return (worker.joined_order,)


class RandomScheduler:
    """A uniformly random available worker."""

    name: ClassVar[str] = "random"
    uniform: ClassVar[bool] = True  # the core may draw the one worker it is shown

    def choose(
        self, task: TaskView, available: Sequence[WorkerView], rng: np.random.Generator
    ) -> str | None:
        candidates = [w for w in available if fits(task, w)]
        return candidates[int(rng.integers(len(candidates)))].worker_id if candidates else None


class LeastLoadedScheduler(_Ranked):
    """The available worker that has done the fewest tasks so far."""

    name: ClassVar[str] = "least_loaded"

    def rank(self, task: TaskView, worker: WorkerView) -> tuple[float, ...]:
        return (worker.tasks_done, worker.joined_order)


SCHEDULERS: dict[str, Callable[[], Scheduler]] = {
    cls.name: cls
    for cls in (AffinityScheduler, FifoScheduler, RandomScheduler, LeastLoadedScheduler)
}


def make_scheduler(name: str) -> Scheduler:
    """A scheduler by its registered name (KeyError names the known ones)."""
    if name not in SCHEDULERS:
        raise KeyError(f"unknown scheduler {name!r}; known: {', '.join(sorted(SCHEDULERS))}")
    return SCHEDULERS[name]()


def check_schedulers(names: Sequence[str], scenario_path: Path | None) -> None:
    """``InputError`` naming ``crowd.schedulers.I`` for the first unknown scheduler."""
    for i, name in enumerate(names):
        if name not in SCHEDULERS:
            problem = f"unknown scheduler {name!r}; known: {', '.join(sorted(SCHEDULERS))}"
            raise InputError(scenario_path, f"crowd.schedulers.{i}", problem)
