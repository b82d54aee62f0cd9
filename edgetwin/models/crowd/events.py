"""The one set of decision kinds the core takes, as plain records.

Both runtimes receive the same ``Decision`` records, in the order the core
takes them, and write them under their own record names (the twin's trace
events, the real foreman's job events; see docs/crowd.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["submit", "load", "assign", "release", "done", "requeue", "aggregate"]
LoadWhy = Literal["task", "broadcast", "deferred_load"]
RequeueWhy = Literal["lost", "rescheduled", "failed", "overdue"]


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision: ``kind`` for a job and, where they apply, an input, stage (name), worker;
    ``detail`` says why a load was sent or a task requeued, or which attempt an assignment
    is (1 first)."""

    kind: Kind
    job: int
    item: int | None = None
    stage: str | None = None
    worker: str | None = None
    detail: str | int | None = None
