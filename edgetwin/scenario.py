"""Scenario files: a frozen, validated model loaded from YAML, with overrides.

A scenario names the devices (by profile or inline), the network, the model,
the strategies with their parameters and the sweeps to run. Every error names
the file, the field and what is wrong (see ``InputError``). The models of its
sections are beside it: the devices and hosts (``device_spec``), availability
(``availability_spec``), the network (``network_spec``), the model (``model_kind``),
the strategies (``strategy_spec``), the sweeps (``sweep_spec``), the crowd
(``crowd_spec``) and the emulator (``emulator_spec``); so are what checks a split
(``split_problems``), the points of the sweeps (``sweep_points``), the warnings of a
mode (``unplayed_settings``) and its files (``resolved_scenario``, ``scenario_paths``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, model_validator

from edgetwin.crowd_spec import CrowdSpec, is_crowd_strategy
from edgetwin.decoder_spec import DecoderSpec, positions_problem
from edgetwin.device_spec import MAX_DEVICES, DeviceSpec, HostSpec, check_device_names
from edgetwin.emulator_spec import CROWD_ONLY_FIELDS, EmulatorSpec
from edgetwin.model_kind import AnyModel, model_kind_problem
from edgetwin.model_spec import ModelSpec
from edgetwin.models import registry
from edgetwin.network_spec import NetworkSpec
from edgetwin.schema import FileName, Seed, Strict, load_yaml_model, validate_model
from edgetwin.split_problems import (
    check_one_split,
    encoder_plan_problem,
    positions_split_problem,
    split_problem,
)
from edgetwin.strategy_spec import StrategySpec
from edgetwin.sweep_spec import DECODER_SWEEP_KEYS, SweepSpec, WorkloadSpec, longest_generation

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
    warmup_batches: Annotated[int, Field(ge=0, le=100)] = 0  # the twin's (docs/twin.md)
    # untimed forwards (a decoder: generations) of a real run's configuration (docs/real_vit.md)
    real_warmups: Annotated[int, Field(ge=0, le=100)] = 2
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
        split = split or encoder_plan_problem(self.strategies, self.sweeps, self.model)
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
        raise ValueError(
            "input_source: an encoder's setting (a decoder's token ids are on every device "
            "already): leave the key out"
        )
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


def load_scenario(path: Path, overrides: Sequence[str] = ()) -> Scenario:
    """Read, override (``key.sub=value``) and validate a scenario file."""
    return load_yaml_model(path, Scenario, overrides)


def validate_scenario(raw: dict[str, Any], path: Path) -> Scenario:
    """Validate a raw mapping; the first error becomes one InputError."""
    return validate_model(Scenario, raw, path)
