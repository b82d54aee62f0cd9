"""Scenario files: a frozen, validated model loaded from YAML, with overrides.

A scenario names the devices (by profile or inline), the network, the model,
the strategies with their parameters and the sweeps to run. Every error names
the file, the field and what is wrong (see ``InputError``). The models of its
sections that stand on their own are beside it: availability (``availability_spec``),
the crowd (``crowd_spec``) and the emulator (``emulator_spec``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from edgetwin.availability_spec import Availability
from edgetwin.crowd_spec import MAX_HORIZON_S, CrowdSpec, is_crowd_strategy, member_names
from edgetwin.decoder_spec import DECODER_PRESETS, DecoderSpec, positions_problem
from edgetwin.emulator_spec import CROWD_ONLY_FIELDS, JOB_TIMEOUT_S, EmulatorSpec
from edgetwin.errors import MODE_EMU, InputError
from edgetwin.file_kinds import ProfileKind
from edgetwin.model_spec import MODEL_PRESETS, ModelSpec
from edgetwin.models import registry
from edgetwin.models.decoder_costs import DecoderWorkload
from edgetwin.models.layout import resolved_segments
from edgetwin.profile import PROFILE_DIR, DeviceProfile, load_profile, profile_path
from edgetwin.schema import (
    BandwidthMbps,
    Batch,
    FileName,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    Seed,
    Strict,
    StrictSweep,
    dump_yaml,
    first_repeated,
    load_yaml_model,
    optional_values,
    read_yaml_mapping,
    validate_model,
)

RunMode = Literal["twin", "emu", "local"]  # the twin, Mininet hosts, local processes
RUN_MODES: tuple[str, ...] = get_args(RunMode)

# Upper bounds past which a run would not fit one machine's memory or a day: a value
# beyond one is a slip (an extra zero), refused with its field named before anything runs.
MAX_DEVICES = 1_024  # ranks of one split model: more than a ViT's 197 or BERT's 512 tokens
MAX_REPETITIONS = 10_000  # of every configuration: a p99 needs a few hundred


def _profile_kind(value: Any) -> str:
    return "profile_inline" if isinstance(value, dict | DeviceProfile) else "profile_name"


ProfileRef = Annotated[
    Annotated[Annotated[str, Field(min_length=1)], Tag("profile_name")]
    | Annotated[DeviceProfile, Tag("profile_inline")],
    Discriminator(_profile_kind),
]


class DeviceSpec(Strict):
    """One device class of the fleet: a profile (shipped name, file, or inline) and overrides."""

    name: str = Field(min_length=1)
    profile: ProfileRef
    count: Annotated[int, Field(gt=0, le=MAX_DEVICES)] = 1
    ram_mb: PositiveFloat | None = None
    battery_wh: PositiveFloat | None = None
    availability: Availability | None = None
    host: str | None = None  # a name in ``hosts``: its ranks share that physical device


class HostSpec(Strict):
    """A physical device that several ranks (or a rank and other load) run on
    (docs/twin.md, "Co-located ranks"). ``compute_slots``: how many ranks compute at once
    at full speed (a time-sliced GPU: 1; a CPU: its cores / each rank's threads);
    ``other_load``: other work sharing the compute as that many always-busy ranks
    (fair time-slicing; a fraction for work that is busy part of the time)."""

    name: FileName
    compute_slots: PositiveFloat = 1.0
    other_load: NonNegativeFloat = 0.0


# the latest a bandwidth step may come: a crowd run's longest horizon, a month of simulated
# time. No run lasts longer, so a later step never plays; and the emulator's clock, which
# waits for each step, died of an OverflowError past threading.TIMEOUT_MAX (292 years)
MAX_STEP_AT_MS = MAX_HORIZON_S * 1e3


def _within_the_longest_run(at_ms: float) -> float:
    if at_ms > MAX_STEP_AT_MS:
        limit = f"a month of simulated time, {MAX_STEP_AT_MS:g} ms (crowd.horizon_s's maximum)"
        raise ValueError(f"after the longest run, {limit}: the step would never play")
    return at_ms


class BandwidthStep(Strict):
    at_ms: Annotated[float, Field(ge=0), AfterValidator(_within_the_longest_run)]
    bandwidth_mbps: BandwidthMbps


class NetworkSpec(Strict):
    """Bandwidth (constant, or a schedule over simulated time), latency, loss, medium."""

    bandwidth_mbps: BandwidthMbps = 400
    latency_ms: NonNegativeFloat = 0
    loss_pct: float = Field(0, ge=0, lt=100)  # per packet, host to host (emulator only)
    medium: Literal["dedicated", "shared"] = "dedicated"
    burst_kb: PositiveFloat | None = None  # htb token bucket; None: tc's (one packet)
    schedule: tuple[BandwidthStep, ...] = ()

    @field_validator("schedule")
    @classmethod
    def _one_rate_at_a_time(cls, steps: tuple[BandwidthStep, ...]) -> tuple[BandwidthStep, ...]:
        """Two steps at one ``at_ms`` give two rates for the same instant (the one sorted
        last was played, unsaid)."""
        repeated = first_repeated([step.at_ms for step in steps])
        if repeated is not None:
            index, at_ms = repeated
            first = [step.at_ms for step in steps].index(at_ms)
            problem = f"steps {first} and {index} are both at at_ms {at_ms:g}"
            raise ValueError(f"{problem}: give an instant one rate")
        return steps


class StrategySpec(Strict):
    """A registered strategy and the parameters its definition takes (prism: ``cr`` or
    ``segments``; lists sweep). ``layers``: layers per device of a strategy that splits
    them (pipeline; empty: the twin balances them by the devices' speed)."""

    name: str
    # CR = N / (L P) is at least 1: a partition of N / P rows has at most that many segments
    cr: tuple[Annotated[float, Field(ge=1)], ...] = ()
    segments: tuple[PositiveInt, ...] = ()
    layers: tuple[PositiveInt, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _listify(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for key in ("cr", "segments"):
                if isinstance(data.get(key), int | float):
                    data[key] = [data[key]]
        return data

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        registry.strategy(name)
        return name

    @model_validator(mode="after")
    def _check_params(self) -> StrategySpec:
        given = [key for key in ("cr", "segments") if getattr(self, key)]
        takes = registry.strategy(self.name).params
        if takes:
            if len(given) != 1 or given[0] not in takes:
                raise ValueError(f"{self.name} needs exactly one of {_quoted(takes)}")
        elif given:
            raise ValueError(f"{self.name} takes no 'cr' or 'segments'")
        if self.layers and not registry.strategy(self.name).splits_layers:
            raise ValueError(f"{self.name} takes no 'layers' (it does not split layers)")
        return self


def _quoted(keys: Sequence[str]) -> str:
    return " or ".join(f"'{key}'" for key in keys)


class SweepSpec(StrictSweep):
    """A cartesian product of values; a scenario may list several sweeps. A list left out
    is its default (``bandwidth_mbps``: the network's; the tokens: the workload's); a list
    given holds at least one value."""

    batch: tuple[Batch, ...] = Field((1,), min_length=1)
    bandwidth_mbps: tuple[BandwidthMbps, ...] = optional_values()
    devices: tuple[Annotated[int, Field(ge=2, le=MAX_DEVICES)], ...] = Field((2,), min_length=1)
    prompt_tokens: tuple[PositiveInt, ...] = optional_values()  # decoders
    output_tokens: tuple[PositiveInt, ...] = optional_values()


# the lists a sweep may leave out (optional_values: their default is empty)
SWEEP_OPTIONAL_LISTS = tuple(n for n, f in SweepSpec.model_fields.items() if f.default == ())
DECODER_SWEEP_KEYS = ("prompt_tokens", "output_tokens")  # a decoder's workload axes


class WorkloadSpec(Strict):
    """What a decoder generates: ``batch`` sequences (the sweeps' batch) of
    ``prompt_tokens`` each, then ``output_tokens`` tokens; sweeps may list other values."""

    prompt_tokens: PositiveInt = 128
    output_tokens: PositiveInt = 16


def _model_kind(value: Any) -> str:
    if isinstance(value, DecoderSpec):
        return "decoder"
    if isinstance(value, dict):
        preset = value.get("preset")
        if value.get("kind") == "decoder" or (
            isinstance(preset, str) and preset in DECODER_PRESETS
        ):
            return "decoder"
    return "encoder"


AnyModel = Annotated[
    Annotated[ModelSpec, Tag("encoder")] | Annotated[DecoderSpec, Tag("decoder")],
    Discriminator(_model_kind),
]
# the keys a decoder's model has and an encoder's has not (``kind`` says which it is), and
# the other way round
_DECODER_KEYS = tuple(
    k for k in DecoderSpec.model_fields if k not in {*ModelSpec.model_fields, "kind"}
)
_ENCODER_KEYS = tuple(k for k in ModelSpec.model_fields if k not in DecoderSpec.model_fields)


def _model_kind_problem(model: dict[str, Any]) -> str | None:
    """Why a model mapping is not the kind its keys say, the message led by the field it is
    about: a ``kind`` other than decoder's, a decoder's keys on a model read as an encoder's
    (no ``kind``; no preset, or an encoder's), or an encoder's keys on a decoder's (each
    was an unknown key)."""
    kind, preset = model.get("kind"), model.get("preset")
    if "kind" in model and kind != "decoder":
        return f"model.kind: {kind!r} is not a kind: decoder for a decoder, none for an encoder"
    if _model_kind(model) == "decoder":
        keys = [key for key in model if key in _ENCODER_KEYS]
        if not keys:
            return None
        named = f"preset {preset!r}" if preset in DECODER_PRESETS else "kind: decoder"
        return f"model.{keys[0]}: an encoder's key, and this model is a decoder ({named})"
    encoder_preset = isinstance(preset, str) and preset in MODEL_PRESETS
    if preset is not None and not encoder_preset:
        return None
    keys = [key for key in model if key in _DECODER_KEYS]
    if not keys:
        return None
    if encoder_preset:
        decoders = ", ".join(sorted(DECODER_PRESETS))
        says = f"a decoder model names a decoder preset ({decoders}) or says kind: decoder"
        return f"model.{keys[0]}: a decoder's key, and preset {preset!r} is an encoder; {says}"
    are = "is a decoder's key" if len(keys) == 1 else "are a decoder's keys"
    says = "a decoder model says kind: decoder (or names a decoder preset)"
    return f"model.kind: required key is missing: {', '.join(keys)} {are}; {says}"


_EMULATOR_DEFAULTS = EmulatorSpec().model_dump()
_ENCODER_DEFAULTS = ModelSpec().model_dump()


class Scenario(Strict):
    """A whole scenario file."""

    name: FileName
    description: str = ""
    mode: RunMode = "twin"
    seed: Seed = 0
    repetitions: Annotated[int, Field(gt=0, le=MAX_REPETITIONS)] = 1
    noise_cv: Annotated[float, Field(ge=0, le=1)] = 0
    input_source: Literal["terminal", "replicated"] = "terminal"
    warmup_batches: Annotated[int, Field(ge=0, le=100)] = 0
    sample_profiles: bool = False  # repetition r runs with bootstrap sample r of each profile
    # prediction intervals at this level on every twin row (docs/calibration.md)
    intervals: Annotated[float, Field(gt=0, lt=1)] | None = None
    model: AnyModel = ModelSpec()
    workload: WorkloadSpec | None = None  # decoders only (None: the defaults)
    devices: tuple[DeviceSpec, ...] = ()
    hosts: tuple[HostSpec, ...] = ()  # physical devices that ranks share (none: one each)
    network: NetworkSpec = NetworkSpec()
    strategies: tuple[StrategySpec, ...] = Field(min_length=1)
    sweeps: tuple[SweepSpec, ...] = Field((SweepSpec(),), min_length=1)
    reference: str | None = None
    crowd: CrowdSpec | None = None
    emulator: EmulatorSpec = EmulatorSpec()

    @model_validator(mode="before")
    @classmethod
    def _decoder_says_so(cls, data: Any) -> Any:
        model = data.get("model") if isinstance(data, dict) else None
        problem = _model_kind_problem(model) if isinstance(model, dict) else None
        if problem is not None:
            raise ValueError(problem)
        return data

    @model_validator(mode="after")
    def _check_crowd(self) -> Scenario:
        crowd_strategies = [s.name for s in self.strategies if is_crowd_strategy(s.name)]
        if self.crowd is None:
            if crowd_strategies:
                raise ValueError(f"strategy {crowd_strategies[0]} needs a 'crowd' section")
            if not self.devices:
                raise ValueError("'devices' needs at least one device class")
            return self
        if len(crowd_strategies) != len(self.strategies):
            crowd = tuple(s.name for s in registry.strategies() if s.pipeline is not None)
            raise ValueError(f"a 'crowd' scenario runs only the strategies {crowd}")
        if self.devices:
            raise ValueError("a 'crowd' scenario lists its phones in crowd.fleet, not 'devices'")
        _check_no_model(self.model)
        for i, sweep in enumerate(self.sweeps):  # a swept batch ran the same job: ignored
            for key, says in (("batch", "crowd.job.inputs"), ("devices", "crowd.fleet")):
                if getattr(sweep, key) != SweepSpec.model_fields[key].default:
                    problem = f"a crowd run takes no {key} from a sweep: {says} says it"
                    raise ValueError(f"sweeps.{i}.{key}: {problem}")
        return self

    @model_validator(mode="after")
    def _check_fleet(self) -> Scenario:
        _check_hosts(self)
        if self.crowd is not None:
            return self
        fleet = sum(d.count for d in self.devices)
        if fleet > MAX_DEVICES:
            raise ValueError(f"'devices' have {fleet} devices in all (at most {MAX_DEVICES})")
        _check_device_names(self.devices)
        for i, sweep in enumerate(self.sweeps):
            if max(sweep.devices) > fleet:
                wanted = max(sweep.devices)
                asks = f"asks for {wanted}"
                if "devices" not in sweep.model_fields_set:
                    asks = f"left out, it is [{wanted}] (a split runs on {wanted} devices)"
                problem = f"{asks}; the fleet has {fleet}"
                raise ValueError(f"sweeps.{i}.devices: {problem}")
        return self

    @model_validator(mode="after")
    def _check_model_kind(self) -> Scenario:
        if isinstance(self.model, DecoderSpec):
            _check_decoder(self, self.model)
            return self
        for i, strategy in enumerate(self.strategies):
            if registry.strategy(strategy.name).splits_layers:
                raise ValueError(f"strategies.{i}.name: {strategy.name} runs decoder models only")
        split = positions_split_problem(self.strategies, self.sweeps, self.model.tokens)
        if split is not None:
            raise ValueError(f"sweeps.{split[0]}.devices: {split[1]}")
        decoder_only = "'workload', prompt_tokens and output_tokens are for decoder models"
        if self.workload is not None:
            raise ValueError(decoder_only)
        for i, sweep in enumerate(self.sweeps):
            swept = next((key for key in DECODER_SWEEP_KEYS if getattr(sweep, key)), None)
            if swept is not None:  # the field first, as a plan names its axes by it
                raise ValueError(f"sweeps.{i}.{swept}: {decoder_only}")
        return self

    @model_validator(mode="after")
    def _check_emulator(self) -> Scenario:
        """Faults and the other ``CROWD_ONLY_FIELDS`` are read by CROWDio runs, and a host's
        core quota caps a device's ranks: set in the other kind of scenario, no mode reads
        them (a ViT run ignored ``task_delay_ms`` unsaid), so they are refused here rather
        than warned of as the emulator's alone."""
        if self.crowd is None and self.emulator.faults:
            problem = "faults play during CROWDio jobs only (a 'crowd' scenario)"
            raise ValueError(f"emulator.faults: {problem}")
        crowd_only = next(  # off their defaults (a resolved scenario's file holds them all)
            (f for f in CROWD_ONLY_FIELDS if getattr(self.emulator, f) != _EMULATOR_DEFAULTS[f]),
            None,
        )
        if self.crowd is None and crowd_only is not None:
            problem = "only CROWDio runs read it (a 'crowd' scenario); no mode of this one does"
            raise ValueError(f"emulator.{crowd_only}: {problem}")
        if self.crowd is not None and self.emulator.host_cpu_cores:
            problem = "a crowd scenario's hosts are limited by their phone classes (cpu_limits)"
            raise ValueError(f"emulator.host_cpu_cores: {problem}")
        return self

    @property
    def encoder(self) -> ModelSpec:
        """The model, for what runs encoders only (a decoder scenario is refused there)."""
        if not isinstance(self.model, ModelSpec):
            raise ValueError(f"scenario {self.name} runs a decoder, not an encoder")
        return self.model

    @property
    def decoder_workload(self) -> WorkloadSpec:
        """The workload of a decoder scenario (its defaults where the file gives none)."""
        return self.workload or WorkloadSpec()


def _check_no_model(model: ModelSpec | DecoderSpec) -> None:
    """A crowd scenario's ``model`` is left at its defaults (as a resolved scenario's file
    holds it): no mode of a crowd run reads it, so a field set there (an encoder's
    tokens, a preset, a decoder) is refused naming it rather than ignored unsaid."""
    if isinstance(model, DecoderSpec):
        field = "model"
    else:
        given = model.model_dump().items()
        field = next((f"model.{k}" for k, v in given if v != _ENCODER_DEFAULTS[k]), "")
    if field:
        problem = "a crowd run's model is its crowd.job.stages (emulator.model the real one's)"
        raise ValueError(f"{field}: {problem}; no mode reads 'model'")


def _check_device_names(devices: Sequence[DeviceSpec]) -> None:
    """Every device of the fleet has a name of its own: the twin keys a device's link, its
    bytes and its trace track by its name, so two devices of one name would share a link."""
    classes: dict[str, int] = {}
    owner: dict[str, int] = {}
    for i, spec in enumerate(devices):
        j = classes.setdefault(spec.name, i)
        if j != i:
            raise ValueError(f"devices.{i}.name: '{spec.name}' is the name of devices.{j} too")
        for name in member_names(spec.name, spec.count):
            j = owner.setdefault(name, i)
            if j != i:
                problem = f"a device named '{name}' is in devices.{j} too"
                raise ValueError(
                    f"devices.{i}.name: {problem} (a class of count N names its devices "
                    "name-0 to name-(N-1))"
                )


def positions_split_problem(
    strategies: Sequence[StrategySpec], sweeps: Sequence[SweepSpec], tokens: int
) -> tuple[int, str] | None:
    """The first sweep (its index) in which a position-wise strategy cannot give every
    device one of ``tokens`` tokens, and why (``STRATEGY: PROBLEM``); None if none."""
    for strategy in strategies:
        definition = registry.strategy(strategy.name)
        if definition.layout is None or definition.one_device:
            continue
        for j, sweep in enumerate(sweeps):
            if max(sweep.devices) > tokens:
                problem = f"{tokens} tokens cannot be split over {max(sweep.devices)} devices"
                return j, f"{strategy.name}: {problem}"
    return None


def _check_hosts(scenario: Scenario) -> None:
    """Every device class's ``host`` is declared, every host runs a device class; the twin
    models a shared host's compute and power, not its battery or its comings and goings."""
    names = [host.name for host in scenario.hosts]
    if len(set(names)) != len(names):
        raise ValueError("host names must be unique")
    for i, device in enumerate(scenario.devices):
        if device.host is None:
            continue
        if device.host not in names:
            known = ", ".join(names) or "none declared"
            raise ValueError(f"devices.{i}.host: unknown host '{device.host}' (hosts: {known})")
        if isinstance(scenario.model, DecoderSpec):
            raise ValueError(f"devices.{i}.host: co-located ranks run encoder models only")
        for key in ("battery_wh", "availability"):
            if getattr(device, key) is not None:
                raise ValueError(f"devices.{i}.{key}: a device on a shared host has none")
    used = {device.host for device in scenario.devices}
    for i, host in enumerate(scenario.hosts):
        if host.name not in used:
            raise ValueError(f"hosts.{i}: no device class runs on host '{host.name}'")


def _check_decoder(scenario: Scenario, model: DecoderSpec) -> None:
    """What a decoder scenario cannot run: strategies without a decoder plan, splits the
    model's shape does not allow, prompts longer than its positions (what only the real
    decoder cannot run, local mode checks: ``emu.local.check_runnable``)."""
    if scenario.input_source != "terminal":
        raise ValueError("input_source: a decoder's token ids are on every device already")
    if scenario.warmup_batches:
        raise ValueError("warmup_batches: a decoder's warm-up generations are not modelled")
    workload = scenario.decoder_workload
    _check_positions(scenario, model)
    _check_one_split(scenario.strategies)
    for i, strategy in enumerate(scenario.strategies):
        definition = registry.strategy(strategy.name)
        if definition.decoder_plan is None:
            known = ", ".join(registry.decoder_names())
            raise ValueError(f"strategies.{i}.name: {strategy.name} runs no decoder ({known} do)")
        if strategy.layers and sum(strategy.layers) != model.layers:
            problem = f"add up to {sum(strategy.layers)}; the model has {model.layers}"
            raise ValueError(f"strategies.{i}.layers: {list(strategy.layers)} {problem}")
        if definition.one_device:
            continue
        for j, sweep in enumerate(scenario.sweeps):
            shortest = min(sweep.prompt_tokens or (workload.prompt_tokens,))
            for devices in sweep.devices:
                problem = split_problem(strategy, model, devices, shortest)
                if problem:
                    raise ValueError(f"sweeps.{j}.devices: {strategy.name} on {devices}: {problem}")


def _check_positions(scenario: Scenario, model: DecoderSpec) -> None:
    """Each sweep's longest prompt and output fit the model's positions
    (``positions_problem``), naming the prompt's field: the sweep's list, else the
    workload's (the output's where only the sweep lists outputs)."""
    workload = scenario.decoder_workload
    for j, sweep in enumerate(scenario.sweeps):
        problem = positions_problem(model, *longest_generation(sweep, workload))
        if not problem:
            continue
        if sweep.prompt_tokens:
            field = f"sweeps.{j}.prompt_tokens"
        elif sweep.output_tokens:
            field = f"sweeps.{j}.output_tokens"
        else:
            field = "workload.prompt_tokens"
        raise ValueError(f"{field}: {problem}")


def _check_one_split(strategies: Sequence[StrategySpec]) -> None:
    """A strategy listed twice gives the same ``layers`` both times: the split is not part
    of a configuration (its key), which runs once, so a second split would not run."""
    first: dict[str, int] = {}
    for i, strategy in enumerate(strategies):
        j = first.setdefault(strategy.name, i)
        if strategy.layers != strategies[j].layers:
            problem = f"{strategy.name} is listed as strategies.{j} with other layers"
            why = "a configuration runs one split"
            raise ValueError(f"strategies.{i}.layers: {problem} ({why})")


def split_problem(strategy: StrategySpec, model: DecoderSpec, devices: int, prompt: int) -> str:
    """Why ``strategy``'s plan cannot split ``model`` over ``devices`` ('' when it can):
    the plan itself says (heads not divisible, more ranks than positions or layers)."""
    segments = 1 if registry.strategy(strategy.name).params else None
    layers = strategy.layers or None
    workload = DecoderWorkload(model, devices, 1, prompt, segments, layers)
    try:
        registry.decoder_plan(strategy.name, workload)
    except ValueError as exc:
        return str(exc)
    return ""


class Configuration(BaseModel):
    """One point of the sweep: what a single results row describes."""

    model_config = ConfigDict(frozen=True)

    strategy: str
    devices: int
    batch: int
    bandwidth_mbps: float
    cr: float | None = None
    segments: int | None = None
    prompt_tokens: int | None = None  # decoders
    output_tokens: int | None = None


def swept_bandwidths(scenario: Scenario) -> list[float]:
    """The bandwidths the sweeps name, in file order, each once (none: empty)."""
    return list(dict.fromkeys(bw for sweep in scenario.sweeps for bw in sweep.bandwidth_mbps))


def unplayed_settings(scenario: Scenario, mode: str) -> list[str]:
    """Warnings for the settings a ``mode`` run does not play: packet loss is dropped packets
    under real TCP, which neither the twin nor loopback has (docs/twin.md); devices that
    come and go and a stream of crowd jobs are the twin's, a real run's devices stay and a
    real crowd run is one job; loopback (``local``) has no latency, schedule or medium; only
    the emulator takes down links, kills workers and caps a host's cores."""
    network, warnings = scenario.network, []
    if mode != "emu" and network.loss_pct > 0:
        warnings.append(
            f"network.loss_pct is {network.loss_pct:g} %, but only {MODE_EMU} drops packets: "
            f"a {mode} run has no loss"
        )
    if mode != "emu":
        emulated = {
            "emulator.faults": bool(scenario.emulator.faults),
            "emulator.host_cpu_cores": bool(scenario.emulator.host_cpu_cores),
        }
        emu_only = f"only {MODE_EMU} plays it: a {mode} run has none"
        warnings += [f"{field} is set, but {emu_only}" for field, on in emulated.items() if on]
    if mode == "twin":
        return warnings
    stay = f"only the twin plays availability: a {mode} run's devices stay"
    warnings += [f"{field} is set, but {stay}" for field in _availability_fields(scenario)]
    if scenario.crowd is not None and scenario.crowd.job.interarrival is not None:
        one_job = "jobs arriving over crowd.horizon_s play in the twin only"
        warnings.append(f"crowd.job.interarrival is set, but a {mode} run is one job: {one_job}")
    if scenario.crowd is not None and mode == "emu":
        warnings += _steps_after_the_job(scenario.network.schedule)
    if mode == "local":
        shaped = {
            "network.latency_ms": network.latency_ms > 0,
            "network.schedule": bool(network.schedule),
            "network.medium": network.medium == "shared",
        }
        unshaped = f"nothing shapes loopback: only {MODE_EMU} plays it"
        warnings += [f"{field} is set, but {unshaped}" for field, on in shaped.items() if on]
    return warnings


def _steps_after_the_job(schedule: Sequence[BandwidthStep]) -> list[str]:
    """Bandwidth steps a real crowd job never reaches: its deadline comes first (the twin
    plays them over ``crowd.horizon_s``)."""
    deadline_ms = JOB_TIMEOUT_S * 1e3
    return [
        f"network.schedule.{k}.at_ms is {step.at_ms:g} ms, but the emulator runs one crowd "
        f"job, which its {JOB_TIMEOUT_S:g} s deadline ends: the step never plays"
        for k, step in enumerate(schedule)
        if step.at_ms >= deadline_ms
    ]


def _availability_fields(scenario: Scenario) -> list[str]:
    """The fields that make devices or phones come and go."""
    if scenario.crowd is None:
        classes = [("devices", d.availability) for d in scenario.devices]
        trace = None
    else:
        classes = [("crowd.fleet", c.availability) for c in scenario.crowd.fleet]
        trace = scenario.crowd.availability_trace
    fields = [f"{group}.{k}.availability" for k, (group, a) in enumerate(classes) if a]
    return fields + (["crowd.availability_trace"] if trace is not None else [])


def configurations(scenario: Scenario) -> list[Configuration]:
    """Expand strategies x sweeps into unique configurations, in file order. Two values of
    L or CR asked for that run with the same L (a CR resolves to the nearest whole L, and L
    is at most a partition's rows) are one configuration, the first asked: each ran and
    wrote the same row twice."""
    seen: dict[Configuration, Configuration] = {}
    for sweep in scenario.sweeps:
        bandwidths = sweep.bandwidth_mbps or (scenario.network.bandwidth_mbps,)
        for strategy in scenario.strategies:
            for batch, bw, devices in itertools.product(sweep.batch, bandwidths, sweep.devices):
                for params in _strategy_params(strategy):
                    n_devices = 1 if registry.strategy(strategy.name).one_device else devices
                    for workload in _workloads(scenario, sweep):
                        config = Configuration(
                            strategy=strategy.name,
                            devices=n_devices,
                            batch=batch,
                            bandwidth_mbps=bw,
                            **params,
                            **workload,
                        )
                        seen.setdefault(_what_runs(scenario, config), config)
    return list(seen.values())


def _what_runs(scenario: Scenario, config: Configuration) -> Configuration:
    """A configuration with the segments L it runs with in place of the L or CR asked for."""
    if config.segments is None and config.cr is None:
        return config
    tokens = split_tokens(scenario, config)
    segments = resolved_segments(tokens, config.devices, config.segments, config.cr)
    return config.model_copy(update={"segments": segments, "cr": None})


def split_tokens(scenario: Scenario, config: Configuration) -> int:
    """The positions a configuration splits over its devices: an encoder's tokens, a
    decoder's prompt."""
    model = scenario.model
    tokens = config.prompt_tokens if isinstance(model, DecoderSpec) else model.tokens
    assert tokens is not None
    return tokens


def longest_generation(sweep: SweepSpec, workload: WorkloadSpec) -> tuple[int, int]:
    """A decoder sweep's longest prompt and longest output (the ``workload``'s where the
    sweep lists none)."""
    prompt = max(sweep.prompt_tokens or (workload.prompt_tokens,))
    return prompt, max(sweep.output_tokens or (workload.output_tokens,))


def _workloads(scenario: Scenario, sweep: SweepSpec) -> Iterator[dict[str, int]]:
    """A decoder's prompt x output lengths in this sweep; one empty one for an encoder."""
    if not isinstance(scenario.model, DecoderSpec):
        yield {}
        return
    workload = scenario.decoder_workload
    prompts = sweep.prompt_tokens or (workload.prompt_tokens,)
    outputs = sweep.output_tokens or (workload.output_tokens,)
    for prompt, output in itertools.product(prompts, outputs):
        yield {"prompt_tokens": prompt, "output_tokens": output}


def _strategy_params(strategy: StrategySpec) -> Iterator[dict[str, Any]]:
    if strategy.cr:
        for cr in strategy.cr:
            yield {"cr": cr}
    elif strategy.segments:
        for segments in strategy.segments:
            yield {"segments": segments}
    else:
        yield {}


# ---------------------------------------------------------------- loading


def load_scenario(path: Path, overrides: Sequence[str] = ()) -> Scenario:
    """Read, override (``key.sub=value``) and validate a scenario file."""
    return load_yaml_model(path, Scenario, overrides)


def load_resolved(path: Path) -> Scenario:
    """A run folder's ``scenario.resolved.yaml``. One written before an empty sweep list
    was refused holds ``[]`` where the sweep left the list out (every crowd run's
    ``bandwidth_mbps``): read as left out, so that older folders still load."""
    raw = read_yaml_mapping(path)
    sweeps = raw.get("sweeps")
    for sweep in sweeps if isinstance(sweeps, list) else ():
        if isinstance(sweep, dict):
            for key in [k for k in SWEEP_OPTIONAL_LISTS if sweep.get(k) == []]:
                del sweep[key]
    return validate_scenario(raw, path)


def validate_scenario(raw: dict[str, Any], path: Path) -> Scenario:
    """Validate a raw mapping; the first error becomes one InputError."""
    return validate_model(Scenario, raw, path)


RESOLVED_FILE = "scenario.resolved.yaml"  # an output folder's scenario as it ran


def dump_resolved(scenario: Scenario) -> str:
    """The validated scenario as YAML, every default filled in but a sweep's lists left out
    (``optional_values``: they stay out, as ``[]`` is refused), an encoder's without the
    decoder-only keys, as before decoders."""
    raw = scenario.model_dump(mode="json")
    if not isinstance(scenario.model, DecoderSpec):
        del raw["workload"]
        for sweep in raw["sweeps"]:
            for key in DECODER_SWEEP_KEYS:
                sweep.pop(key, None)  # left out of the dump when not given
    return dump_yaml(raw)


def files_of_runs(scenario: Scenario, scenario_path: Path) -> list[Path]:
    """Every file the scenario's runs read, which their rows depend on: the device and
    phone profiles (shipped ones too) and the availability trace (not the reference:
    it changes no row)."""
    base = scenario_path.resolve().parent
    files = [profile_path(d.profile, base) for d in scenario.devices if isinstance(d.profile, str)]
    crowd = scenario.crowd
    if crowd is not None:
        files += [profile_path(c.profile, base, "phone") for c in crowd.fleet]
        if crowd.availability_trace is not None:
            files.append(base / crowd.availability_trace)
    return files


def device_profile(spec: DeviceSpec, index: int, scenario_path: Path | None) -> DeviceProfile:
    """The profile of ``scenario_path``'s device class ``index`` (a path relative to that
    file's folder); an InputError naming the profile file, or the field that names it."""
    if isinstance(spec.profile, DeviceProfile):
        return spec.profile
    base = None if scenario_path is None else scenario_path.resolve().parent
    try:
        return load_profile(spec.profile, base)
    except InputError as exc:
        if exc.path is not None:  # the profile file itself is wrong: it names itself
            raise
        raise InputError(scenario_path, f"devices.{index}.profile", exc.problem) from None


def with_absolute_paths(scenario: Scenario, scenario_path: Path) -> Scenario:
    """The scenario with every file it names (reference, profile files, availability trace)
    as an absolute path, so that it runs the same from any folder; relative paths were
    relative to ``scenario_path``'s folder. Shipped profile names stay names."""
    base = scenario_path.resolve().parent

    def profile(name: str, kind: ProfileKind) -> str:
        path = profile_path(name, base, kind)
        return name if path == PROFILE_DIR / f"{name}.yaml" else str(path.resolve())

    devices = tuple(
        d
        if isinstance(d.profile, DeviceProfile)
        else d.model_copy(update={"profile": profile(d.profile, "device")})
        for d in scenario.devices
    )
    update: dict[str, Any] = {"devices": devices}
    if scenario.reference is not None:
        update["reference"] = str((base / scenario.reference).resolve())
    crowd = scenario.crowd
    if crowd is not None:
        fleet = tuple(
            c.model_copy(update={"profile": profile(c.profile, "phone")}) for c in crowd.fleet
        )
        trace = crowd.availability_trace
        absolute = None if trace is None else str((base / trace).resolve())
        update["crowd"] = crowd.model_copy(update={"fleet": fleet, "availability_trace": absolute})
    return scenario.model_copy(update=update)
