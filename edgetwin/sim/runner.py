"""Run a scenario in the twin: one SimPy environment per configuration and repetition."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, fields, replace

import numpy as np
import simpy

from edgetwin.configuration import configuration_columns, resolve_segments, step_label
from edgetwin.decoder_spec import DecoderSpec, kept_positions
from edgetwin.device_fleet import FleetMember
from edgetwin.errors import InputError
from edgetwin.models import registry
from edgetwin.models.costs import CostPlan
from edgetwin.models.decoder_costs import contributed_bytes
from edgetwin.network_spec import BandwidthStep
from edgetwin.number_text import counted, exact_text
from edgetwin.profile import MB, bootstrap_count
from edgetwin.progress import Step, naming
from edgetwin.results import STATUS_OK, ResultRow
from edgetwin.run_failures import DEVICE_LOST, OUT_OF_MEMORY
from edgetwin.scenario import Scenario
from edgetwin.sim import decoder_run
from edgetwin.sim.device import Device, DeviceLeft, Interval
from edgetwin.sim.forward import Forward
from edgetwin.sim.generation import Generation
from edgetwin.sim.host import Host
from edgetwin.sim.intervals import fleet_half_widths, with_intervals
from edgetwin.sim.network import Network
from edgetwin.sweep_points import Configuration, configurations


def warms_up(scenario: Scenario) -> bool:
    """Whether the twin's runs of ``scenario`` begin with warm-up batches: an encoder's
    with ``warmup_batches`` set do; a decoder's generation and a crowd run have none."""
    encoder = scenario.crowd is None and not isinstance(scenario.model, DecoderSpec)
    return encoder and scenario.warmup_batches > 0


@dataclass(frozen=True)
class RunOutcome:
    """A results row plus what the twin saw on the way (for traces and checks)."""

    config: Configuration
    row: ResultRow
    intervals: tuple[Interval, ...]
    energy_by_state_j: dict[str, dict[str, float]]
    time_by_state_ms: dict[str, dict[str, float]]
    # what the network brought the devices in the measured batch, a ring's forwarding
    # included (row.bytes_sent counts each rank's pieces once); 0 for a lost run, as it
    bytes_received: float
    # network.schedule steps it ended before (a failed run's count for nothing: unplayed_of_ran)
    unplayed_steps: tuple[BandwidthStep, ...] = ()


def unplayed_of_ran(outcomes: Iterable[RunOutcome]) -> list[tuple[BandwidthStep, ...]]:
    """Each run's network.schedule steps it ended before, for ``unplayed_schedule``, of the
    runs that ran: a failed run (out of memory, a device lost) has no times a step could
    change, so it is neither a run a step did not play in nor one of the runs counted."""
    return [outcome.unplayed_steps for outcome in outcomes if outcome.row.ok]


@dataclass(frozen=True)
class _World:
    """What one configuration's run simulates, built fresh for it."""

    env: simpy.Environment
    devices: list[Device]
    members: list[FleetMember]
    network: Network
    rng: np.random.Generator


def run_scenario(
    scenario: Scenario,
    fleet: list[FleetMember],
    record_intervals: bool = False,
    on_progress: Step | None = None,
) -> Iterator[RunOutcome]:
    """Every configuration x repetition of the scenario, in a stable order; ``on_progress``
    is told each as it ends (its ``step_label`` if it takes one)."""
    advance = None if on_progress is None else naming(on_progress)
    for config in configurations(scenario):
        for rep in range(scenario.repetitions):
            outcome = simulate(scenario, fleet, config, rep, record_intervals)
            if scenario.intervals is not None:
                outcome = _with_prediction_intervals(scenario, fleet, outcome, rep)
            yield outcome
            if advance is not None:  # no label to build for nobody
                advance(step_label(config, rep))


def _with_prediction_intervals(
    scenario: Scenario, fleet: list[FleetMember], outcome: RunOutcome, rep: int
) -> RunOutcome:
    """The outcome's row with its prediction intervals: the configuration rerun under each
    bootstrap variant of the fleet's profiles (sim/intervals.py)."""
    assert scenario.intervals is not None
    members = fleet[: outcome.config.devices]
    plain = scenario.model_copy(update={"sample_profiles": False})
    variants = [
        simulate(plain, _variant_fleet(members, b), outcome.config, rep).row
        for b in range(max(bootstrap_count(m.profile) for m in members))
    ]
    decoder = isinstance(scenario.model, DecoderSpec)
    widths = fleet_half_widths([m.profile for m in members], scenario.intervals, decoder)
    return replace(outcome, row=with_intervals(outcome.row, variants, widths))


def configuration_words(config: Configuration) -> list[int]:
    """The configuration as four 32-bit words for its runs' random stream: what it is, not
    where it stands in a sweep, so that every sweep holding it (a plan's axes, a scenario
    with fewer strategies) gives its repetitions the same draws."""
    digest = hashlib.sha256(config.model_dump_json().encode()).digest()
    return [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]


def _variant_fleet(members: list[FleetMember], index: int) -> list[FleetMember]:
    return [member.variant(index) for member in members]


def simulate(
    scenario: Scenario,
    fleet: list[FleetMember],
    config: Configuration,
    rep: int,
    record_intervals: bool = False,
) -> RunOutcome:
    """One batch of one configuration in a fresh environment."""
    entropy = [scenario.seed, *configuration_words(config), rep]
    rng = np.random.default_rng(np.random.SeedSequence(entropy))
    env = simpy.Environment()
    members = fleet[: config.devices]
    hosts = {spec.name: Host(env, spec) for spec in scenario.hosts}
    devices = [
        _device(env, scenario, m, rep, None if m.spec.host is None else hosts[m.spec.host])
        for m in members
    ]
    for device in devices:
        device.record_intervals = record_intervals
    stacks = {d.name: d.profile.network for d in devices}
    network = Network(env, scenario.network, config.bandwidth_mbps, stacks)
    world = _World(env, devices, members, network, rng)
    try:
        if isinstance(scenario.model, DecoderSpec):
            row = _generate(scenario, config, rep, world)
        else:
            row = _forward(scenario, config, rep, world)
    except OverflowError:  # an int product (a patch size of 10^300) past a float's range
        overflows = "a number overflows a float"
        raise InputError(None, None, _far_out_of_range(config, overflows)) from None
    _check_finite(row, config)
    return RunOutcome(
        config=config,
        row=row,
        intervals=tuple(i for d in devices for i in d.intervals),
        energy_by_state_j={d.name: dict(d.energy_j) for d in devices},
        time_by_state_ms={d.name: dict(d.time_ms) for d in devices},
        bytes_received=sum(network.bytes_received.values()) if row.ok else 0.0,
        unplayed_steps=network.unplayed_steps(),
    )


def _check_finite(row: ResultRow, config: Configuration) -> None:
    """A row's numbers are finite: a value so far out of any physical range that one of
    them overflows a float to inf (a rate near 1e-300, a latency or a model dimension near
    1e308) is an InputError, not a row its results.csv cannot hold."""
    for column in fields(row):
        value = getattr(row, column.name)
        if isinstance(value, float) and math.isinf(value):
            overflows = f"its {column.name} overflows a float (inf)"
            raise InputError(None, None, _far_out_of_range(config, overflows))


def _far_out_of_range(config: Configuration, overflows: str) -> str:
    """What overflowed a float in a configuration's run, and what that says."""
    return (
        f"{config.strategy} on {counted(config.devices, 'device')}, batch {config.batch}: "
        f"{overflows}; a value of the scenario or of a device profile is far out of any "
        "physical range (a latency, a size or a model dimension far too large, or a rate "
        "far too small)"
    )


def _forward(scenario: Scenario, config: Configuration, rep: int, world: _World) -> ResultRow:
    """Warm-up batches and the measured one of an encoder."""
    model = scenario.encoder
    segments, _ = resolve_segments(scenario, config)
    work = registry.cost_plan(
        model, config.strategy, config.devices, segments, scenario.input_source
    )
    row_bytes = model.width * model.bytes_per_element
    status = _load_model(world.devices, work, config.batch, model.bytes_per_element)
    jitter = _jitter(world.rng, scenario.noise_cv)
    forwards = [
        Forward(
            world.env,
            work,
            world.devices,
            world.network,
            config.batch,
            model.blocks,
            row_bytes,
            jitter,
        )
        for _ in range(scenario.warmup_batches + 1)
    ]
    forward = forwards[-1]
    if status == STATUS_OK:
        status = _run_batches(world, forwards)
    for device in world.devices:
        device.close()
    sent = work.contributed_bytes(config.batch, model.blocks, row_bytes)
    return _row(scenario, config, rep, forward, world.devices, sent, status)


def _generate(scenario: Scenario, config: Configuration, rep: int, world: _World) -> ResultRow:
    """A decoder's prefill and decode steps, unless its weights, KV cache and
    activations do not fit."""
    assert config.prompt_tokens is not None and config.output_tokens is not None
    plan = decoder_run.plan_for(scenario, config, world.devices)
    kept = kept_positions(config.prompt_tokens, config.output_tokens)
    status = decoder_run.memory_status(scenario, config, plan, world.devices, kept)
    phases = plan.phases(config.output_tokens)
    quiet = all(d.battery_j is None for d in world.devices) and all(
        m.spec.availability is None for m in world.members
    )  # nothing interrupts a device: its local phases are booked ahead
    jitter = _jitter(world.rng, scenario.noise_cv)
    generation = Generation(
        world.env, phases, world.devices, world.network, jitter, book_ahead=quiet
    )
    if status == STATUS_OK:
        status = _run_batches(world, [generation])
    for device in world.devices:
        device.close()
    ok = status == STATUS_OK
    columns = decoder_run.generation_columns(plan, config, generation, world.devices, ok)
    total_ms = columns.pop("total_ms", math.nan)
    return ResultRow(
        **configuration_columns(scenario, config, phases),
        mode="twin",
        rep=rep,
        total_ms=total_ms,
        per_sample_ms=total_ms / config.batch,
        energy_j=columns.pop("energy_j", math.nan),
        status=status,
        bytes_sent=round(contributed_bytes(phases)) if ok else 0,  # docs/llm.md, not the ring
        **columns,
    )


def _device(
    env: simpy.Environment,
    scenario: Scenario,
    member: FleetMember,
    rep: int,
    host: Host | None = None,
    battery: bool = True,
) -> Device:
    """The member's device in repetition ``rep``: its profile (a bootstrap variant when
    ``sample_profiles``) and RAM, and its class's battery unless not ``battery``."""
    played = member.variant(rep) if scenario.sample_profiles else member
    battery_wh = member.spec.battery_wh if battery else None
    return Device(env, member.name, played.profile, played.ram_mb, battery_wh, host=host)


def _load_model(devices: list[Device], work: CostPlan, batch: int, element_bytes: int) -> str:
    """Make weights and the forward's peak activations resident; a device they do not fit
    fails the run."""
    for rank, device in enumerate(devices):
        activations = work.activation_bytes(rank, batch, element_bytes)
        need_mb = (work.weight_bytes_per_device + activations) / MB
        if not device.load(need_mb):
            return f"{OUT_OF_MEMORY} on {device.name}: {_shortfall(device, need_mb)}"
    return STATUS_OK


def _shortfall(device: Device, need_mb: float) -> str:
    """Why ``need_mb`` did not fit ``device``: its RAM, or its host's beside its other ranks."""
    need = f"weights and activations need {need_mb:,.1f} MB"
    host = device.host
    if host is None or need_mb > device.ram_mb:
        return f"{need} of its {exact_text(device.ram_mb)} MB"
    others = f"{host.resident_mb:,.1f} MB its host's other ranks hold"
    return f"{need} beside the {others}, of {exact_text(host.ram_mb)} MB"


def _run_batches(world: _World, forwards: list[Forward] | list[Generation]) -> str:
    """Run warm-up batches, then the measured one (the last), unless a device leaves."""
    env, devices, rng = world.env, world.devices, world.rng
    status = [STATUS_OK]
    running: list[simpy.Process] = []

    def guarded(forward: Forward | Generation, rank: int) -> Generator[simpy.Event, object, None]:
        try:
            yield from forward.rank_process(rank)
        except simpy.Interrupt as stop:
            cause = stop.cause
            if isinstance(cause, DeviceLeft) and status[0] == STATUS_OK:
                status[0] = f"{DEVICE_LOST}: {cause}"

    def stop_all(cause: DeviceLeft) -> None:
        for process in running:
            if process.is_alive and process is not env.active_process:
                process.interrupt(cause)

    for device, member in zip(devices, world.members, strict=True):
        device.on_leave.append(stop_all)
        if member.spec.availability is not None:
            env.process(device.availability(member.spec.availability, rng))
    for forward in forwards:
        if forward is forwards[-1]:
            for device in devices:
                device.start_measuring()
            world.network.start_measuring()
        forward.start_ms = env.now
        running[:] = [env.process(guarded(forward, rank)) for rank in range(len(devices))]
        env.run(until=env.all_of(running))
        if status[0] != STATUS_OK:
            break
    return status[0]


def _jitter(rng: np.random.Generator, cv: float) -> Callable[[], float]:
    """Multiplicative lognormal noise with mean 1 and coefficient of variation ``cv``."""
    if cv <= 0:
        return lambda: 1.0
    sigma = math.sqrt(math.log1p(cv * cv))
    return lambda: float(rng.lognormal(-sigma * sigma / 2, sigma))


def _row(
    scenario: Scenario,
    config: Configuration,
    rep: int,
    forward: Forward,
    devices: list[Device],
    contributed_bytes: int,
    status: str,
) -> ResultRow:
    terminal = forward.times[0]
    ok = status == STATUS_OK
    total_ms = max(t.finished_ms for t in forward.times) - forward.start_ms if ok else math.nan
    return ResultRow(
        **configuration_columns(scenario, config),
        mode="twin",
        rep=rep,
        compute_ms=terminal.compute_ms if ok else math.nan,
        staging_ms=terminal.staging_ms if ok else math.nan,
        comm_ms=terminal.comm_ms if ok else math.nan,
        total_ms=total_ms,
        per_sample_ms=total_ms / config.batch,
        energy_j=sum(d.total_energy_j for d in devices) if ok else math.nan,
        status=status,
        bytes_sent=contributed_bytes if ok else 0,  # docs/llm.md, not the ring
    )


def decoder_memory_status(
    scenario: Scenario, fleet: list[FleetMember], config: Configuration
) -> str:
    """The status a decoder run of ``config`` starts with, without simulating it: ``ok``, or
    out of memory (its weights, KV cache and activations against each device's RAM, as
    ``simulate`` checks them)."""
    assert config.prompt_tokens is not None and config.output_tokens is not None
    env = simpy.Environment()
    members = fleet[: config.devices]
    devices = [_device(env, scenario, m, 0, battery=False) for m in members]
    plan = decoder_run.plan_for(scenario, config, devices)
    kept = kept_positions(config.prompt_tokens, config.output_tokens)
    return decoder_run.memory_status(scenario, config, plan, devices, kept)
