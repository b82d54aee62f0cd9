"""A job in the twin: the core's task table plus what the job cost on the phones.

The decisions (task states, dependencies, release, requeue) are the core's
(``edgetwin.models.crowd``); this record adds the energy, loads, bytes and
timings the twin measures for the results row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgetwin.crowd_spec import CrowdJobSpec
from edgetwin.models.crowd import table


@dataclass(eq=False)
class Job:
    """A submitted job: the core's record, and what it cost."""

    core: table.Job
    spec: CrowdJobSpec
    finished_ms: float | None = None
    energy_start_j: dict[str, float] = field(default_factory=dict)  # phone -> J at joining
    energy_j: dict[str, float] = field(default_factory=dict)  # phone -> J drawn for the job
    broadcast_load_ms: dict[str, float] = field(default_factory=dict)
    peak_session_mb: float = 0.0
    gflops: float = 0.0
    cold_loads: int = 0
    warm_loads: int = 0
    evictions: int = 0
    bytes_sent: int = 0
    bytes_moved: int = 0

    @property
    def job_id(self) -> int:
        return self.core.job_id

    @property
    def submitted_ms(self) -> float:
        return self.core.submitted_ms

    @property
    def tasks(self) -> list[list[table.Task]]:
        """[item][stage]."""
        return self.core.tasks

    @property
    def stages(self) -> int:
        return len(self.spec.stages)

    @property
    def items_done(self) -> int:
        return self.core.items_done

    @property
    def redispatched(self) -> int:
        return self.core.requeued

    @property
    def finished(self) -> bool:
        return self.finished_ms is not None
