"""JIT deferred loading: the counts the real foreman's rule reads, kept up to date.

The rule is the real foreman's (``edgetwin.emu.crowdio.dispatch.prefetches``):
a stage's load instruction is held until the first task upstream of it
completes (the stage is *released*); from then on, each time the foreman
dispatches, an idle phone (no task; it may be loading) whose own stage has no
unassigned task left is sent the LOAD of the first released stage that has
more unassigned tasks than phones holding it (resident or queued into their
session). Phones are taken in the order they joined.

The real foreman runs one job at a time; the twin may have several in flight,
so the counts are summed over them (with one job they are that job's counts).
"""

from __future__ import annotations


class StageCounts:
    """Per stage: unassigned tasks (all, and of jobs that released it) and holders."""

    def __init__(self, stages: int) -> None:
        self.unassigned = [0] * stages  # tasks not given to a phone yet (waiting or ready)
        self.released = [0] * stages  # of those, in jobs where the stage is released
        self.holders = [0] * stages  # connected phones holding it, resident or queued

    def add(self, stage: int, tasks: int, released: bool) -> None:
        """``tasks`` more (or, negative, fewer) unassigned tasks of ``stage``."""
        self.unassigned[stage] += tasks
        if released:
            self.released[stage] += tasks

    def release(self, stage: int, unassigned_in_job: int) -> None:
        """A job released ``stage`` with this many of its tasks unassigned."""
        self.released[stage] += unassigned_in_job

    def hold(self, old: int | None, new: int | None) -> None:
        """A phone's held stage changes from ``old`` to ``new`` (None: nothing)."""
        if old is not None:
            self.holders[old] -= 1
        if new is not None:
            self.holders[new] += 1

    def any_wanted(self) -> bool:
        """Whether some released stage has more unassigned tasks than holders."""
        return any(r > h for r, h in zip(self.released, self.holders, strict=True))

    def stage_to_load(self, current: int | None, banned: set[int]) -> int | None:
        """The stage an idle phone holding ``current`` is told to load, or None."""
        if current is not None and self.unassigned[current] > 0:
            return None  # its own stage still has work
        for stage, (released, holders) in enumerate(zip(self.released, self.holders, strict=True)):
            if stage != current and stage not in banned and released > holders:
                return stage
        return None
