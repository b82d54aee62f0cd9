"""Question models: the sweep axes, the kinds of question a plan answers, and a whole
question file (a base scenario, overrides, the axes and what to answer).

Loading and checking a file against the scenario it sweeps: ``plan/question_file.py``.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from edgetwin.crowd_spec import DEFAULT_SCHEDULER
from edgetwin.models import registry
from edgetwin.models.strategies.crowdio import CROWDIO_STREAMING
from edgetwin.policies.scheduling import SCHEDULERS
from edgetwin.schema import (
    MAPPING_WORDS,
    BandwidthMbps,
    Batch,
    FileName,
    PositiveFloat,
    PositiveInt,
    Strict,
    StrictSweep,
    first_repeated,
    given_text,
    optional_values,
)
from edgetwin.strategy_spec import StrategySpec


class Axes(StrictSweep):
    """The sweep: a cartesian product of batch x bandwidth x devices (distributed only),
    and for a decoder x prompt x output lengths (left out: the scenario's workload). A
    question whose answer no bandwidth changes (``BANDWIDTH_FREE``) may leave the
    bandwidths out: the scenario's ``network.bandwidth_mbps``."""

    batch: tuple[Batch, ...] = Field(min_length=1)
    bandwidth_mbps: tuple[BandwidthMbps, ...] = optional_values()
    devices: tuple[Annotated[int, Field(ge=2)], ...] = Field((2,), min_length=1)
    prompt_tokens: tuple[PositiveInt, ...] = optional_values()
    output_tokens: tuple[PositiveInt, ...] = optional_values()


class CrowdAxes(StrictSweep):
    """The sweep of a crowd question: fleet sizes (phones; the classes keep their shares) at
    each bandwidth of the phones' links (left out: the scenario's, as ``crowd_runs``
    has them: its sweeps' bandwidths, else ``network.bandwidth_mbps``); one number stands
    for a list of it, as on a device question's axes."""

    fleet_size: tuple[PositiveInt, ...] = Field(min_length=1)
    bandwidth_mbps: tuple[BandwidthMbps, ...] = optional_values()

    @field_validator("fleet_size", "bandwidth_mbps")
    @classmethod
    def _increasing(cls, values: tuple[float, ...], info: ValidationInfo) -> tuple[float, ...]:
        if list(values) != sorted(set(values)):
            raise ValueError(f"{info.field_name} values must be strictly increasing")
        return values


def _distributed(strategy: StrategySpec) -> StrategySpec:
    """A strategy the twin runs on several devices (an encoder's or a decoder's: the
    scenario refuses one its model does not run)."""
    distributed = tuple(
        s.name
        for s in registry.strategies()
        if (s.cost_plan is not None or s.decoder_plan is not None) and not s.one_device
    )
    if strategy.name not in distributed:
        raise ValueError(f"strategy must be distributed: one of {distributed}")
    return strategy


class SmallestFleet(Strict):
    """Smallest fleet / bandwidth whose p95 latency over repetitions meets a target."""

    kind: Literal["smallest_fleet"]
    target_p95_ms: PositiveFloat
    strategy: StrategySpec

    @field_validator("strategy")
    @classmethod
    def _check(cls, strategy: StrategySpec) -> StrategySpec:
        if len(strategy.cr) + len(strategy.segments) > 1:
            raise ValueError("smallest_fleet takes one 'cr' or 'segments' value")
        return _distributed(strategy)


class Crossover(Strict):
    """The bandwidth from which a distributed strategy beats one device (per batch, fleet)."""

    kind: Literal["crossover"]
    strategy: StrategySpec

    @field_validator("strategy")
    @classmethod
    def _check(cls, strategy: StrategySpec) -> StrategySpec:
        return _distributed(strategy)


# the results columns a best_mode question may minimise, and how a figure names them
BEST_METRICS = {
    "total_ms": "latency per batch (ms)",
    "ttft_ms": "time to first token (ms)",
    "tpot_ms": "time per output token (ms)",
    "energy_per_token_j": "energy per token (J)",
    "energy_j": "energy per batch (J)",  # every model's rows: a battery's budget
}
# the metrics only a decoder's rows carry (an encoder's rows leave them empty)
DECODER_METRICS = ("ttft_ms", "tpot_ms", "energy_per_token_j")


class BestMode(Strict):
    """The candidate with the lowest mean of each metric per batch x bandwidth (and, for a
    decoder, per prompt x output length), and the latency-energy Pareto front."""

    kind: Literal["best_mode"]
    metrics: tuple[str, ...] = Field(("total_ms",), min_length=1)

    @field_validator("metrics")
    @classmethod
    def _known(cls, metrics: tuple[str, ...]) -> tuple[str, ...]:
        for metric in metrics:
            if metric not in BEST_METRICS:
                raise ValueError(f"unknown metric {metric!r}; known: {', '.join(BEST_METRICS)}")
        repeated = first_repeated(metrics)
        if repeated is not None:
            raise ValueError(f"{repeated[1]} is given twice; give each metric once")
        return metrics


class LongestContext(Strict):
    """The longest prompt each decoder candidate fits (weights, KV cache and a layer's
    activations against every device's RAM), per batch and output length: a search over
    ``prompt_tokens``."""

    kind: Literal["longest_context"]


class CrowdCapacity(Strict):
    """The smallest crowd fleet that keeps up with jobs arriving every T s (plan/capacity.py
    defines "keeps up"); ``target_p95_s`` defaults to T."""

    kind: Literal["crowd_capacity"]
    strategy: str = CROWDIO_STREAMING
    scheduler: str = Field(DEFAULT_SCHEDULER, pattern=r"^[a-z_]+$")
    target_p95_s: PositiveFloat | None = None

    @field_validator("strategy")
    @classmethod
    def _pipeline(cls, name: str) -> str:
        if registry.strategy(name).pipeline is None:
            raise ValueError(f"{name} is not a crowd pipeline")
        return name

    @field_validator("scheduler")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in SCHEDULERS:
            raise ValueError(f"unknown scheduler {name!r}; known: {', '.join(sorted(SCHEDULERS))}")
        return name


def _kind_name(kind: type[BaseModel]) -> str:
    """The name a question kind goes by in a file (its ``kind`` literal)."""
    return str(get_args(kind.model_fields["kind"].annotation)[0])


SMALLEST_FLEET = _kind_name(SmallestFleet)
CROSSOVER = _kind_name(Crossover)
BEST_MODE = _kind_name(BestMode)
LONGEST_CONTEXT = _kind_name(LongestContext)
CROWD_CAPACITY = _kind_name(CrowdCapacity)
AnyKind = SmallestFleet | Crossover | BestMode | LongestContext | CrowdCapacity
KINDS = tuple(_kind_name(kind) for kind in get_args(AnyKind))
QuestionKind = Annotated[AnyKind, Field(discriminator="kind")]
# questions that may share one sweep of the scenario's own strategies (a list in one file)
SHARED_SWEEP = (BEST_MODE, LONGEST_CONTEXT)
# questions whose answer does not depend on the bandwidth (memory against RAM): their axes
# may leave bandwidth_mbps out
BANDWIDTH_FREE = (LONGEST_CONTEXT,)


AXES_TAGS = ("devices", "crowd")


def _axes_kind(value: Any) -> str:
    crowd = isinstance(value, CrowdAxes) or (isinstance(value, dict) and "fleet_size" in value)
    return AXES_TAGS[crowd]


SweepAxes = Annotated[
    Annotated[Axes, Tag(AXES_TAGS[0])] | Annotated[CrowdAxes, Tag(AXES_TAGS[1])],
    Discriminator(_axes_kind),
]


QUESTION_TAGS = ("one", "list")


def _question_kind(value: Any) -> str:
    return QUESTION_TAGS[isinstance(value, list | tuple)]


Questions = Annotated[
    Annotated[QuestionKind, Tag(QUESTION_TAGS[0])]
    | Annotated[tuple[QuestionKind, ...], Tag(QUESTION_TAGS[1])],
    Discriminator(_question_kind),
]


class PlanQuestion(Strict):
    """A whole question file."""

    name: FileName
    description: str = ""
    scenario: str = Field(min_length=1)  # relative to the question file
    set: tuple[str, ...] = ()  # --set overrides of the scenario, applied in order
    axes: SweepAxes
    question: Questions  # one question, or a list of questions that share the sweep

    @model_validator(mode="before")
    @classmethod
    def _one_kind_of_axes(cls, data: Any) -> Any:
        """The axes' keys say their kind (``fleet_size``: a crowd's, else a device sweep's):
        a device key beside ``fleet_size``, an unknown key where neither ``fleet_size`` nor
        ``batch`` says the kind, and a crowd question's axes with neither, are named for
        what they are (they were an unknown key of the crowd's axes, and a missing
        ``batch``)."""
        axes = data.get("axes") if isinstance(data, dict) else None
        if not isinstance(axes, dict):
            return data
        crowd_keys, device_keys = CrowdAxes.model_fields.keys(), Axes.model_fields.keys()
        if "fleet_size" in axes:
            beside = [key for key in axes if key in device_keys - crowd_keys]
            if beside:
                raise ValueError(
                    f"axes: fleet_size sweeps a crowd, {beside[0]} a device split; a "
                    "question sweeps one or the other (a crowd's axes are fleet_size and "
                    "bandwidth_mbps)"
                )
        elif "batch" not in axes:
            known = sorted(crowd_keys | device_keys)
            for key in axes:
                close = difflib.get_close_matches(str(key), known, n=1)
                if key not in known and close:
                    raise ValueError(f"axes.{key}: unknown key (did you mean {close[0]!r}?)")
            question = data.get("question")
            if isinstance(question, dict) and question.get("kind") == CROWD_CAPACITY:
                problem = f"a {CROWD_CAPACITY} question sweeps fleet sizes (and bandwidth_mbps)"
                raise ValueError(f"axes.fleet_size: required key is missing: {problem}")
        return data

    @model_validator(mode="before")
    @classmethod
    def _one_question_or_a_list(cls, data: Any) -> Any:
        """A question given neither a mapping nor a list was said to be no mapping, as if a
        list of questions were not taken too."""
        given = data.get("question", {}) if isinstance(data, dict) else {}
        if not isinstance(given, dict | list | tuple | BaseModel):
            listed = f"or a list of questions, one '- kind: ...' a line (got {given_text(given)})"
            raise ValueError(f"question: should be {MAPPING_WORDS}; {listed}")
        return data

    @property
    def kinds(self) -> tuple[AnyKind, ...]:
        """The questions asked (a file may list several that share the sweep)."""
        return self.question if isinstance(self.question, tuple) else (self.question,)

    @property
    def crowd(self) -> bool:
        """Whether the question sweeps a crowd scenario (fleet sizes in the crowd twin)."""
        return isinstance(self.kinds[0], CrowdCapacity)

    @property
    def searches_context(self) -> bool:
        """Whether the sweep also searches each candidate's longest context."""
        return any(isinstance(k, LongestContext) for k in self.kinds)
