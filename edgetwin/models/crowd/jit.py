"""JIT deferred loading: the counts its rule reads, kept up to date.

A stage's load instruction is held until the first task upstream of it
completes (the stage is *released*); from then on, each time the core
dispatches, an idle worker (no task; it may be loading) whose own stage has no
unassigned task left is sent the LOAD of the first released stage that has
more unassigned tasks than workers holding it (resident or queued into their
session). Workers are taken in the order they joined; stages in the order the
core first saw them. With several jobs in flight the counts are summed over
them, by stage key.
"""

from __future__ import annotations


class StageCounts:
    """Per stage key: unassigned tasks (all, and of jobs that released it) and holders."""

    def __init__(self) -> None:
        self.unassigned: dict[str, int] = {}  # tasks not given to a worker yet
        self.released: dict[str, int] = {}  # of those, in jobs where the stage is released
        self.holders: dict[str, int] = {}  # connected workers holding it, resident or queued

    def add_stage(self, key: str) -> None:
        self.unassigned[key] = self.released[key] = self.holders[key] = 0

    def add(self, key: str, tasks: int, released: bool) -> None:
        """``tasks`` more (or, negative, fewer) unassigned tasks of stage ``key``."""
        self.unassigned[key] += tasks
        if released:
            self.released[key] += tasks

    def release(self, key: str, unassigned_in_job: int) -> None:
        """A job released stage ``key`` with this many of its tasks unassigned."""
        self.released[key] += unassigned_in_job

    def hold(self, old: str | None, new: str | None) -> None:
        """A worker's held stage changes from ``old`` to ``new`` (None: nothing)."""
        if old is not None:
            self.holders[old] -= 1
        if new is not None:
            self.holders[new] += 1

    def any_wanted(self) -> bool:
        """Whether some released stage has more unassigned tasks than holders."""
        return any(r > self.holders[key] for key, r in self.released.items())

    def busy(self, key: str | None) -> bool:
        """Whether stage ``key`` still has unassigned tasks (its holders are not JIT-loaded)."""
        return key is not None and self.unassigned[key] > 0

    def stage_to_load(self, current: str | None, banned: set[str]) -> str | None:
        """The stage an idle worker holding ``current`` is told to load, or None."""
        if self.busy(current):
            return None  # its own stage still has work
        for key, released in self.released.items():
            if key != current and key not in banned and released > self.holders[key]:
                return key
        return None
