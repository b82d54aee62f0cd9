"""What the real foreman keeps of its stages and workers, beside the decision core.

The decisions (which worker, which load, JIT, requeue) are the core's
(``edgetwin.models.crowd``); a worker's record here holds what only the foreman's
connection knows: its reported status, the blobs on its disk, its GPU, and which
job each of its outstanding load and unload replies belongs to.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Set
from dataclasses import dataclass, field

from edgetwin.emu.crowdio.records import TensorSpec, WorkerStatus
from edgetwin.models.crowd.workers import Facts


def stage_key(name: str, sha256: str) -> str:
    """A stage's key in the core: its name and checksum, as the worker knows what it holds
    (residency carries over between jobs that share both; byte-identical stages under
    two names are two stages)."""
    return f"{name}:{sha256}"


@dataclass(frozen=True)
class JobStage:
    """A stage as the foreman keeps it for one job, with what it declares it takes and gives."""

    index: int
    name: str
    sha256: str
    blob_b64: str
    blob_bytes: int
    ram_mb: float
    input: TensorSpec
    output: TensorSpec

    @property
    def key(self) -> str:
        return stage_key(self.name, self.sha256)


@dataclass
class WorkerState:
    """What the foreman knows of one enrolled worker from its connection."""

    worker_id: str
    has_gpu: bool
    status: WorkerStatus
    cached: set[str] = field(default_factory=set)  # SHA-256 of blobs on its disk
    load_jobs: deque[int] = field(default_factory=deque)  # core job ids of pending LOADs
    unload_jobs: deque[int] = field(default_factory=deque)  # ... of pending UNLOADs
    loaded_at_ms: float = 0.0  # foreman clock: when its last MODEL_LOADED came
    device: str | None = None  # the name it enrolled under (None: its id)

    def facts(self, keys_of: Mapping[str, Set[str]]) -> Facts:
        """The core's facts; ``keys_of`` gives the stage keys of each blob's SHA-256."""
        return Facts(
            frozenset(key for sha256 in self.cached for key in keys_of.get(sha256, ())),
            self.status.free_ram_mb,
            self.status.battery_pct,
            self.has_gpu,
        )
