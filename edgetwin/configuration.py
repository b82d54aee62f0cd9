"""What names a configuration of a scenario: its segments L and CR, its result columns,
and the runs of a crowd scenario. The twin and the real code both label their rows with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from edgetwin.decoder_spec import DecoderSpec, kept_positions
from edgetwin.device_fleet import fleet_members
from edgetwin.models import registry
from edgetwin.models.decoder_costs import DecoderPlan, DecoderWorkload, Ops, phase_flops
from edgetwin.models.layout import resolved_segments
from edgetwin.models.strategies.pipeline import device_layers, positions_held
from edgetwin.number_text import exact_text
from edgetwin.profile import MB, DeviceProfile
from edgetwin.scenario import Scenario
from edgetwin.sweep_points import Configuration, split_tokens, swept_bandwidths


def resolve_segments(scenario: Scenario, config: Configuration) -> tuple[int | None, float | None]:
    """Segments L a configuration runs with and the compression ratio CR = N / (L P) that
    L gives (strategies taking them). A requested CR is resolved to the nearest whole L,
    so the CR used can differ from it: BERT-base's 128 tokens on 2 devices at CR 9.9 run
    with 6 segments, CR 10.67. L is at most the largest partition's rows (more segments
    than rows send every row, as the layout does). A decoder's tokens are its prompt's."""
    if not registry.strategy(config.strategy).params:
        return None, None
    tokens = split_tokens(scenario, config)
    segments = resolved_segments(tokens, config.devices, config.segments, config.cr)
    return segments, round(tokens / (segments * config.devices), 2)


def configuration_columns(
    scenario: Scenario, config: Configuration, phases: Sequence[Ops] | None = None
) -> dict[str, Any]:
    """The columns that name a configuration, and the mean GFLOPs a device does per sample
    (a decoder: per sequence, over the whole generation; ``phases``: its phases, if built)."""
    segments, cr = resolve_segments(scenario, config)
    model = scenario.model
    decoder: dict[str, Any] = {}
    if isinstance(model, DecoderSpec):
        assert config.output_tokens is not None
        phases = phases or decoder_plan(scenario, config).phases(config.output_tokens)
        gflops = [phase_flops(phases, r) / config.batch / 1e9 for r in range(config.devices)]
        decoder = {"prompt_tokens": config.prompt_tokens, "output_tokens": config.output_tokens}
    else:
        work = registry.cost_plan(
            model, config.strategy, config.devices, segments, scenario.input_source
        )
        gflops = [work.flops_per_sample(r, model.blocks) / 1e9 for r in range(config.devices)]
    return {
        "scenario": scenario.name,
        "strategy": config.strategy,
        "devices": config.devices,
        "batch": config.batch,
        "bandwidth_mbps": config.bandwidth_mbps,
        "cr": cr,
        "segments": segments,
        "gflops_per_device": sum(gflops) / len(gflops),
        **decoder,
    }


def layer_split(plan: DecoderPlan) -> str | None:
    """A layer split's layers on each device, in rank order ("8+16": what the twin balanced
    on the profiles, or the scenario's ``layers``); None where every device holds every
    layer."""
    if not registry.strategy(plan.strategy).splits_layers:
        return None
    return "+".join(str(layers) for layers in plan.kv_layers)


def planned_layers(
    scenario: Scenario,
    config: Configuration,
    profiles: Sequence[DeviceProfile],
    free_bytes: Sequence[float],
) -> tuple[int, ...] | None:
    """The layer split a configuration runs on devices of ``profiles`` with ``free_bytes``
    of RAM (rank order): balanced on them (``pipeline.device_layers``); None where the
    scenario sizes it (its ``layers``) or the strategy splits no layers."""
    assert isinstance(scenario.model, DecoderSpec)
    assert config.prompt_tokens is not None and config.output_tokens is not None
    given = next(s.layers for s in scenario.strategies if s.name == config.strategy)
    if given or not registry.strategy(config.strategy).splits_layers:
        return None
    return device_layers(
        scenario.model,
        profiles,
        free_bytes,
        config.batch,
        config.prompt_tokens,
        config.output_tokens,
    )


def split_shortfall(
    scenario: Scenario, config: Configuration, free_bytes: Sequence[float]
) -> str | None:
    """Where a configuration's layer split is balanced (``planned_layers``) and no split of
    its layers over devices with ``free_bytes`` holds the generation, what its status says
    of it: the positions kept (prompt + output - 1) and the most any split holds
    (``pipeline.positions_held``), or that none holds the weights; None where one holds
    it or the split is the scenario's."""
    model = scenario.model
    assert isinstance(model, DecoderSpec)
    assert config.prompt_tokens is not None and config.output_tokens is not None
    given = next(s.layers for s in scenario.strategies if s.name == config.strategy)
    if given or not registry.strategy(config.strategy).splits_layers:
        return None
    kept = kept_positions(config.prompt_tokens, config.output_tokens)
    held = positions_held(model, free_bytes, config.batch, config.prompt_tokens, kept)
    if held is None:
        return "no layer split holds the weights"
    if held >= kept:
        return None
    return (
        f"no layer split holds its {kept} positions (prompt + output - 1); "
        f"the most one holds, {held}, is the row's layer_split"
    )


def fleet_layers(scenario: Scenario, config: Configuration) -> tuple[int, ...] | None:
    """``planned_layers`` on the scenario's first ``config.devices`` members as the twin
    builds them before a run (``device_fleet.fleet_members``: each class's profile, not
    ``sample_profiles``' variants, paths absolute or shipped names), all their RAM free.
    The layer split a real run gets from its launcher; None also where a profile has no
    memory bandwidth (the twin runs no decoder on it)."""
    members = fleet_members(scenario, None)[: config.devices]
    profiles = [member.profile for member in members]
    if any(profile.memory is None for profile in profiles):
        return None
    free = [member.ram_mb * MB for member in members]
    return planned_layers(scenario, config, profiles, free)


def fleet_ram_bytes(scenario: Scenario, devices: int) -> list[float]:
    """The RAM (bytes) of the scenario's first ``devices`` members, in rank order, as the
    twin builds them (``device_fleet.fleet_members``): what a real run's rows hold each
    rank's memory against."""
    return [member.ram_mb * MB for member in fleet_members(scenario, None)[:devices]]


def decoder_plan(
    scenario: Scenario, config: Configuration, stage_layers: tuple[int, ...] | None = None
) -> DecoderPlan:
    """The decoder plan of a configuration; a layer split's sizes from ``stage_layers``,
    else the scenario's, else equal."""
    assert isinstance(scenario.model, DecoderSpec) and config.prompt_tokens is not None
    segments, _ = resolve_segments(scenario, config)
    given = next(s.layers for s in scenario.strategies if s.name == config.strategy)
    workload = DecoderWorkload(
        scenario.model,
        config.devices,
        config.batch,
        config.prompt_tokens,
        segments,
        stage_layers or given or None,
    )
    return registry.decoder_plan(config.strategy, workload)


@dataclass(frozen=True)
class CrowdRun:
    """One run: a dependency mode (strategy), a scheduler, a repetition, and the bandwidth of
    the phones' links (of the shared medium, on one)."""

    strategy: str
    scheduler: str
    rep: int
    bandwidth_mbps: float


def configuration_label(config: Configuration) -> str:
    """How progress names a configuration: its candidate label (the registry's), batch,
    bandwidth, a decoder's tokens: ``prism cr 9.9 x2, batch 8, 1,000 Mbps, prompt 2,048``
    (``exact_text``: ``g`` wrote 1,000,000 Mbps as ``1e+06``)."""
    label = registry.candidate_label(config.strategy, config.devices, config.cr, config.segments)
    tokens = "" if config.prompt_tokens is None else f", prompt {exact_text(config.prompt_tokens)}"
    tokens += "" if config.output_tokens is None else f", {config.output_tokens} out"
    return f"{label}, batch {config.batch}, {exact_text(config.bandwidth_mbps)} Mbps{tokens}"


def step_label(config: Configuration, rep: int) -> str:
    """How progress names a configuration's repetition:
    ``prism cr 9.9 x2, batch 8, 400 Mbps, rep 0`` (``configuration_label``, then the rep)."""
    return f"{configuration_label(config)}, rep {rep}"


def run_label(run: CrowdRun) -> str:
    """How progress, errors and fault records name a crowd run:
    ``crowdio_streaming affinity 10 Mbps rep 0``."""
    return f"{run.strategy} {run.scheduler} {exact_text(run.bandwidth_mbps)} Mbps rep {run.rep}"


def crowd_bandwidths(scenario: Scenario) -> list[float]:
    """The bandwidths a crowd scenario runs at: its sweeps', in file order, else the
    network's."""
    return swept_bandwidths(scenario) or [scenario.network.bandwidth_mbps]


def crowd_runs(scenario: Scenario) -> list[CrowdRun]:
    """Every bandwidth x strategy x scheduler x repetition of a crowd scenario, in a stable
    order, bandwidth first (the emulator shapes its links once per bandwidth); a strategy
    listed twice runs once, as a configuration does (it wrote the same rows twice)."""
    assert scenario.crowd is not None
    strategies = dict.fromkeys(strategy.name for strategy in scenario.strategies)
    return [
        CrowdRun(strategy, scheduler, rep, bandwidth_mbps)
        for bandwidth_mbps in crowd_bandwidths(scenario)
        for strategy in strategies
        for scheduler in scenario.crowd.schedulers
        for rep in range(scenario.repetitions)
    ]


def in_turn(runs: Sequence[CrowdRun]) -> list[CrowdRun]:
    """The order a real crowd run plays ``runs`` (``crowd_runs``' order): each bandwidth's
    runs together, as there, but repetition by repetition, each playing every strategy and
    scheduler once; so a drift of the machine over a run (loads that get faster as it goes
    on, say) falls on every strategy alike, not on the one that runs first. Rows and
    summaries keep ``crowd_runs``' order."""
    first: dict[float, int] = {}
    for index, run in enumerate(runs):
        first.setdefault(run.bandwidth_mbps, index)
    return sorted(runs, key=lambda run: (first[run.bandwidth_mbps], run.rep))
