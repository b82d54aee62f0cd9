"""What the affinity evaluation found per scheduler and instance (twin or emulator runs)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

from edgetwin.comparison import relative_pct
from edgetwin.evaluate.optimum import Assignment, Optimum
from edgetwin.results import ResultRow


@dataclass(frozen=True)
class AssignmentReplay:
    """A scheduler's real assignments (emulator runs) timed in the offline model, means in s."""

    assignments: tuple[Assignment, ...]  # per run, each phone's tasks in the order they completed
    pooled_s: float  # with the costs of all the instance's runs (the optimum's)
    own_s: float  # each run with the costs it measured alone


@dataclass(frozen=True)
class SchedulerResult:
    """One scheduler on one instance, means over the repetitions."""

    makespan_s: float
    makespan_max_s: float
    cold_loads: float
    warm_loads: float
    evictions: float
    bytes_moved: float
    regret_pct: float  # vs the optimum with prefetch (a lower bound in the model)
    regret_dispatch_pct: float  # vs the optimum loading at dispatch, as the twin's tasks do
    replay: AssignmentReplay | None = None  # emu: its real assignments timed in the offline model


@dataclass(frozen=True)
class RunFigures:
    """One run of a scheduler, from a twin row or an emulator job."""

    makespan_s: float
    cold_loads: int
    warm_loads: int
    evictions: int
    bytes_moved: int

    @classmethod
    def of_row(cls, row: ResultRow) -> RunFigures:
        return cls(
            row.total_ms / 1e3,
            row.cold_loads or 0,
            row.warm_loads or 0,
            row.evictions or 0,
            row.bytes_moved or 0,
        )


def scheduler_result(
    runs: Sequence[RunFigures],
    best: Optimum,
    dispatch: Optimum,
    replay: AssignmentReplay | None = None,
) -> SchedulerResult:
    """Means over a scheduler's runs and its regret against both optima."""
    mean_s = fmean(r.makespan_s for r in runs)
    optimum_s = best.schedule.makespan_ms / 1e3
    dispatch_s = dispatch.schedule.makespan_ms / 1e3
    return SchedulerResult(
        makespan_s=mean_s,
        makespan_max_s=max(r.makespan_s for r in runs),
        cold_loads=fmean(r.cold_loads for r in runs),
        warm_loads=fmean(r.warm_loads for r in runs),
        evictions=fmean(r.evictions for r in runs),
        bytes_moved=fmean(r.bytes_moved for r in runs),
        regret_pct=relative_pct(mean_s, optimum_s),
        regret_dispatch_pct=relative_pct(mean_s, dispatch_s),
        replay=replay,
    )


@dataclass(frozen=True)
class InstanceResult:
    """One instance and strategy: its size, the optimum and every scheduler."""

    name: str
    strategy: str
    phones: tuple[str, ...]
    inputs: int
    stages: int
    cache: str
    optimum: Optimum
    optimum_dispatch: Optimum
    schedulers: dict[str, SchedulerResult]
    placements_measured: tuple[int, int] | None = None  # emu: (phone, stage) pairs measured, of all
