"""Scenario files: a frozen, validated model loaded from YAML, with overrides.

A scenario names the devices (by profile or inline), the network, the model,
the strategies with their parameters and the sweeps to run. Every error names
the file, the field and what is wrong (see ``InputError``). The models of its
sections are beside it: the devices and hosts (``device_spec``), availability
(``availability_spec``), the network (``network_spec``), the model (``model_kind``),
the strategies (``strategy_spec``), the sweeps (``sweep_spec``), the crowd
(``crowd_spec``) and the emulator (``emulator_spec``); so is what checks a split
(``split_problems``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from edgetwin.crowd_spec import CrowdSpec, is_crowd_strategy
from edgetwin.decoder_spec import DecoderSpec, positions_problem
from edgetwin.device_spec import MAX_DEVICES, DeviceSpec, HostSpec, check_device_names
from edgetwin.emulator_spec import CROWD_ONLY_FIELDS, JOB_TIMEOUT_S, EmulatorSpec
from edgetwin.errors import MODE_EMU, InputError
from edgetwin.file_kinds import ProfileKind
from edgetwin.model_kind import AnyModel, model_kind_problem
from edgetwin.model_spec import ModelSpec
from edgetwin.models import registry
from edgetwin.models.layout import resolved_segments
from edgetwin.network_spec import BandwidthStep, NetworkSpec
from edgetwin.profile import PROFILE_DIR, DeviceProfile, load_profile, profile_path
from edgetwin.schema import (
    FileName,
    Seed,
    Strict,
    dump_yaml,
    load_yaml_model,
    read_yaml_mapping,
    validate_model,
)
from edgetwin.split_problems import check_one_split, positions_split_problem, split_problem
from edgetwin.strategy_spec import StrategySpec
from edgetwin.sweep_spec import (
    DECODER_SWEEP_KEYS,
    SWEEP_OPTIONAL_LISTS,
    SweepSpec,
    WorkloadSpec,
    longest_generation,
)

RunMode = Literal["twin", "emu", "local"]  # the twin, Mininet hosts, local processes
RUN_MODES: tuple[str, ...] = get_args(RunMode)

# Upper bound past which a run would not fit a day: a value beyond it is a slip (an extra
# zero), refused with its field named before anything runs (``MAX_DEVICES`` likewise).
MAX_REPETITIONS = 10_000  # of every configuration: a p99 needs a few hundred

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
        problem = model_kind_problem(model) if isinstance(model, dict) else None
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
        check_device_names(self.devices)
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
    check_one_split(scenario.strategies)
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
