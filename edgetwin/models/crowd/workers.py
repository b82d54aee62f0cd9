"""The core's record of each worker, and what the runtime reports about it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from edgetwin.models.crowd.table import Task
from edgetwin.models.crowd.views import WorkerView


class Facts(NamedTuple):
    """What only the runtime knows of a worker: its storage cache, RAM, battery, GPU."""

    cached: frozenset[str]  # stage keys on its storage
    free_ram_mb: float
    battery_pct: float | None  # None: mains powered
    has_gpu: bool


@dataclass(eq=False, slots=True)
class Worker:
    """A worker as the core sees it: connected, its one task, the stage it holds."""

    worker_id: str
    joined_order: int
    connected: bool = True
    task: Task | None = None
    held: str | None = None  # stage key resident or queued into its session
    banned: set[str] = field(default_factory=set)  # stages whose load failed here
    assigned: int = 0
    done: int = 0
    version: int = 0  # bumped on every change; index entries of older versions are stale
    view: WorkerView | None = None

    @property
    def available(self) -> bool:
        """Connected and without a task (it may be loading): it may be given one."""
        return self.connected and self.task is None

    def make_view(self, facts: Facts) -> WorkerView:
        return WorkerView(  # positional: the fields in order (worker_id ... joined_order)
            self.worker_id,
            self.held,
            facts.cached,
            facts.free_ram_mb,
            facts.battery_pct,
            self.done / self.assigned if self.assigned else 1.0,
            facts.has_gpu,
            self.done,
            self.joined_order,
        )
