"""A scenario's ``crowd`` section (the CROWDio pipeline): phone classes, the job's
stages and arrivals, the schedulers to compare and the horizon, with their bounds.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import Field, model_validator

from edgetwin.availability_spec import Availability, ConstantDist, Distribution
from edgetwin.models import registry
from edgetwin.number_text import count_text, figure_text
from edgetwin.schema import FileName, NonNegativeFloat, PositiveFloat, PositiveInt, Strict

# Upper bounds past which a crowd run would not fit one machine's memory or a day: a value
# beyond one is a slip (an extra zero), refused with its field named before anything runs.
MAX_PHONES = 1_000_000  # ten times the benchmarked 100,000-phone crowd (1.3 GB, 157 s)
MAX_JOB_INPUTS = 100_000  # a job's tasks are its inputs x stages, each a row of the table
MAX_HORIZON_S = 31 * 86_400.0  # a month of simulated time
MAX_JOBS = 100_000  # jobs expected to arrive within the horizon (horizon / mean interarrival)
MAX_CHURN_CYCLES = 10_000_000  # phones' up-down cycles expected in a run: 12x the 100,000-phone day
DEFAULT_SCHEDULER = "affinity"  # a crowd's scheduler unless it names others (policies/scheduling)

# the shipped crowd pipelines in registry order (the crowd twin seeds by this index)
CROWD_STRATEGIES = tuple(s.name for s in registry.BUILTIN if s.pipeline is not None)


def is_crowd_strategy(name: str) -> bool:
    """Whether the registered strategy ``name`` is a crowd pipeline."""
    return registry.strategy(name).pipeline is not None


Percent = Annotated[float, Field(ge=0, le=100)]


class PhoneClassSpec(Strict):
    """A class of phones in a crowd fleet: a phone profile and how many (count or share)."""

    name: FileName
    profile: str = Field(min_length=1)
    count: Annotated[int, Field(gt=0, le=MAX_PHONES)] | None = None
    share: Annotated[float, Field(gt=0, le=1)] | None = None
    ram_mb: PositiveFloat | None = None
    battery_start_pct: tuple[Percent, Percent] = (100.0, 100.0)
    availability: Availability | None = None

    @model_validator(mode="after")
    def _check_size(self) -> PhoneClassSpec:
        if (self.count is None) == (self.share is None):
            raise ValueError("a phone class needs exactly one of 'count' or 'share'")
        low, high = self.battery_start_pct
        if low > high or high == 0:
            raise ValueError("battery_start_pct is [low, high] with 0 <= low <= high, high > 0")
        return self


class StageSpec(Strict):
    """One ordered stage (partition) of the pipelined model."""

    name: FileName
    size_mb: PositiveFloat
    ram_mb: PositiveFloat
    load_peak_mb: PositiveFloat | None = None
    gflops: NonNegativeFloat
    # the activation it hands to the next stage, raw bytes; None: the job's activation_bytes
    output_bytes: PositiveInt | None = None

    @model_validator(mode="after")
    def _check_peak(self) -> StageSpec:
        if self.load_peak_mb is not None and self.load_peak_mb < self.ram_mb:
            raise ValueError("load_peak_mb must be at least ram_mb")
        return self

    @property
    def peak_mb(self) -> float:
        """The most RAM its session holds: while it is created (``load_peak_mb``), else
        ``ram_mb``; what a phone's session budget must hold for it to be resident there."""
        return self.load_peak_mb or self.ram_mb


class CrowdJobSpec(Strict):
    """A pipeline job: N inputs through S stages, and how often one arrives."""

    inputs: Annotated[int, Field(gt=0, le=MAX_JOB_INPUTS)] = 5
    stages: tuple[StageSpec, ...] = Field(min_length=1)
    input_bytes: PositiveInt = 512
    activation_bytes: PositiveInt = 3072
    compression_saving_pct: Annotated[float, Field(ge=0, lt=100)] = 0
    result_bytes: PositiveInt = 8
    aggregation_ms_per_input: NonNegativeFloat = 1.0
    first_at_s: NonNegativeFloat = 0
    interarrival: Distribution | None = None

    @model_validator(mode="after")
    def _check_stages(self) -> CrowdJobSpec:
        names = [stage.name for stage in self.stages]
        if len(set(names)) != len(names):
            raise ValueError("stage names must be unique")
        if isinstance(self.interarrival, ConstantDist) and self.interarrival.value_s == 0:
            raise ValueError("a constant interarrival must be more than 0 s")
        if self.stages[-1].output_bytes is not None:
            last = f"stages.{len(self.stages) - 1}.output_bytes"
            raise ValueError(f"{last}: the last stage sends the job's result_bytes, not one")
        return self


class CrowdSpec(Strict):
    """Phones, the job, the schedulers to compare and the horizon of a crowd run."""

    fleet: tuple[PhoneClassSpec, ...] = Field(min_length=1)
    fleet_size: Annotated[int, Field(gt=0, le=MAX_PHONES)] | None = None
    job: CrowdJobSpec
    schedulers: tuple[Annotated[str, Field(pattern=r"^[a-z_]+$")], ...] = Field(
        (DEFAULT_SCHEDULER,), min_length=1
    )
    cache: Literal["cold", "warm"] = "cold"
    availability_trace: str | None = None
    horizon_s: Annotated[float, Field(gt=0, le=MAX_HORIZON_S)] = 3600
    drain_s: NonNegativeFloat = 600
    # a task not answered this long after its dispatch: its phone is cut off and the task
    # queued again (the decision core's ``task_deadline_ms``; docs/crowd.md); None: never
    task_deadline_s: Annotated[float, Field(gt=0, le=MAX_HORIZON_S)] | None = None

    def class_counts(self) -> list[int]:
        """Phones per class: ``count``, or ``share`` of ``fleet_size`` by largest remainder."""
        counts = [spec.count or 0 for spec in self.fleet]
        shared = [i for i, spec in enumerate(self.fleet) if spec.share is not None]
        size = self.fleet_size or 0
        exact = {i: (self.fleet[i].share or 0.0) * size for i in shared}
        for i in shared:
            counts[i] = math.floor(exact[i])
        missing = round(sum(exact.values())) - sum(counts[i] for i in shared)
        for i in sorted(shared, key=lambda i: (counts[i] - exact[i], i))[:missing]:
            counts[i] += 1
        return counts

    @model_validator(mode="after")
    def _check_fleet(self) -> CrowdSpec:
        names = [phone_class.name for phone_class in self.fleet]
        if len(set(names)) != len(names):
            raise ValueError("phone class names must be unique")
        _check_phone_names(names, self.class_counts())
        if len(set(self.schedulers)) != len(self.schedulers):
            raise ValueError("schedulers must be unique")
        shares = [c.share for c in self.fleet if c.share is not None]
        if shares and self.fleet_size is None:
            raise ValueError("a phone class with 'share' needs crowd.fleet_size")
        if self.fleet_size is not None and not shares:
            raise ValueError("crowd.fleet_size sizes the classes given by 'share'; none has one")
        if sum(shares) > 1 + 1e-9:
            raise ValueError(f"phone class shares add up to {figure_text(sum(shares))} (at most 1)")
        if self.job.first_at_s >= self.horizon_s:
            raise ValueError("the first job arrives after horizon_s")
        phones = sum(c.count or 0 for c in self.fleet) + (self.fleet_size or 0)
        if phones > MAX_PHONES:
            raise ValueError(f"the fleet has {phones:,} phones (at most {MAX_PHONES:,})")
        self._check_churn()
        every = self.job.interarrival
        if every is not None and self.horizon_s / every.expected_s > MAX_JOBS:
            jobs = count_text(self.horizon_s / every.expected_s)
            raise ValueError(
                f"job.interarrival brings {jobs} jobs in horizon_s (at most {MAX_JOBS:,})"
            )
        return self

    def _check_churn(self) -> None:
        """The up-down cycles the fleet's availability brings in ``horizon_s + drain_s``, at
        most MAX_CHURN_CYCLES (a mean of microseconds ran for days); the class that brings
        the most is named."""
        run_s = self.horizon_s + self.drain_s
        cycles = [
            count * run_s / (spec.availability.up.expected_s + spec.availability.down.expected_s)
            if spec.availability is not None
            else 0.0
            for spec, count in zip(self.fleet, self.class_counts(), strict=True)
        ]
        if sum(cycles) > MAX_CHURN_CYCLES:
            most = cycles.index(max(cycles))
            raise ValueError(
                f"fleet.{most}.availability: the fleet's phones go away and come back "
                f"{count_text(sum(cycles))} times in horizon_s + drain_s (at most "
                f"{MAX_CHURN_CYCLES:,}; this class's {count_text(cycles[most])})"
            )


def member_names(class_name: str, count: int) -> list[str]:
    """The names of a class's devices or phones: its name, or name-k for each of several."""
    return [class_name] if count == 1 else [f"{class_name}-{k}" for k in range(count)]


def _check_phone_names(names: list[str], counts: list[int]) -> None:
    """Every phone has a name of its own (the twin and the emulator key a phone's link,
    process and records by it): a class named like a phone of another class is refused."""
    count_of = dict(zip(names, counts, strict=True))
    for i, name in enumerate(names):
        base, dash, k = name.rpartition("-")
        if dash and k.isdigit() and name in member_names(base, count_of.get(base, 0)):
            raise ValueError(
                f"fleet.{i}.name: a phone named '{name}' is one of class '{base}''s phones too "
                "(a class of N phones names them name-0 to name-(N-1))"
            )
