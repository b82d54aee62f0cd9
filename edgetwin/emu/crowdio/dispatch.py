"""What the real foreman keeps of its stages and workers, beside the decision core.

The decisions (which worker, which load, JIT, requeue) are the core's
(``edgetwin.models.crowd``); a worker's record here holds what only the foreman's
connection knows: its reported status, the blobs on its disk, its GPU, and which
job each of its outstanding load and unload replies belongs to.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from edgetwin.emu.crowdio.records import WorkerStatus
from edgetwin.models.crowd.workers import Facts


@dataclass(frozen=True)
class JobStage:
    """A stage as the foreman keeps it for one job (stages are keyed by their SHA-256, so
    residency carries over between jobs that share a stage)."""

    index: int
    name: str
    sha256: str
    blob_b64: str
    blob_bytes: int
    ram_mb: float


@dataclass
class WorkerState:
    """What the foreman knows of one enrolled worker from its connection."""

    worker_id: str
    has_gpu: bool
    status: WorkerStatus
    cached: set[str] = field(default_factory=set)  # SHA-256 of blobs on its disk
    load_jobs: deque[int] = field(default_factory=deque)  # core job ids of pending LOADs
    unload_jobs: deque[int] = field(default_factory=deque)  # ... of pending UNLOADs

    def facts(self) -> Facts:
        return Facts(
            frozenset(self.cached),
            self.status.free_ram_mb,
            self.status.battery_pct,
            self.has_gpu,
        )
