"""A decoder scenario as real processes (mode ``local``; the emulator's hosts too).

Each configuration is one launch of the real decoder (``launcher``): the scenario's
``real_warmups`` untimed generations, then one timed generation per repetition, one row
each. A row carries rank 0's TTFT, TPOT, total and phases (the terminal holds every
token; waiting for peers is comm), every rank's bytes (docs/llm.md's convention, as the
twin's), and the last rank's comparison with one device. ``weights_mb`` and
``kv_cache_mb`` are the contract's figures for the split that ran (the plan of that
run: the device whose weights and KV cache take the largest share of its scenario RAM),
the same the twin reports.
Pipeline runs the scenario's ``layers`` if it gives them, else the split the twin
balances on the devices' profiles and RAM (``configuration.fleet_layers``), decided here
and passed to the ranks. Local mode does not shape the network: ``bandwidth_mbps`` is
the scenario's nominal value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from operator import attrgetter
from pathlib import Path

from edgetwin.configuration import (
    configuration_columns,
    decoder_plan,
    fleet_layers,
    fleet_ram_bytes,
    layer_split,
    resolve_segments,
)
from edgetwin.decoder_spec import DecoderSpec, kept_positions, kv_bytes_per_token
from edgetwin.emu.launch_deadline import launch_deadline_s, wire_s
from edgetwin.emu.llm.launcher import WORKER, launch_decoder
from edgetwin.emu.llm.records import RankRecord, measured
from edgetwin.emu.llm.runs import DECODER_STRATEGIES, DecoderRun, model_problem
from edgetwin.emu.memory_check import BatchMemory, check_weights_fit
from edgetwin.errors import MODE_TWIN, InputError
from edgetwin.models import registry
from edgetwin.models.decoder_costs import (
    DecoderWorkload,
    contributed_bytes,
    full_weight_bytes,
    messages,
    phase_flops,
)
from edgetwin.profile import MB
from edgetwin.results import ResultRow
from edgetwin.scenario import Scenario
from edgetwin.sweep_points import Configuration, configurations
from edgetwin.sweep_spec import longest_generation

DTYPE_FIELDS = ("weight_dtype", "kv_dtype", "activation_dtype")
# starts the ranks of one run: (run, timeout_s, threads, extra worker args) -> records
DecoderLauncher = Callable[[DecoderRun, float, int, Sequence[str]], list[RankRecord]]


def decoder_model(scenario: Scenario) -> DecoderSpec | None:
    """The scenario's decoder, or None for an encoder scenario."""
    return scenario.model if isinstance(scenario.model, DecoderSpec) else None


def check_decoder_runnable(
    scenario: Scenario, path: Path | None = None, *, machine: bool = True
) -> None:
    """``InputError`` naming ``path`` and the field if the real decoder cannot run it;
    ``machine`` False checks the scenario only (not this machine's free memory)."""
    model = decoder_model(scenario)
    assert model is not None
    for name in DTYPE_FIELDS:
        if getattr(model, name) != "fp32":
            problem = f"the real decoder runs fp32 (got {getattr(model, name)}); use {MODE_TWIN}"
            raise InputError(path, f"model.{name}", problem)
    unbuildable = model_problem(model)
    if unbuildable is not None:
        field, why = unbuildable
        raise InputError(path, f"model.{field}", f"{why}; use {MODE_TWIN}")
    index = {strategy.name: i for i, strategy in enumerate(scenario.strategies)}
    for name, i in index.items():
        if name not in DECODER_STRATEGIES:
            problem = f"{name} has no real decoder; local mode runs {', '.join(DECODER_STRATEGIES)}"
            raise InputError(path, f"strategies.{i}.name", problem)
    for config in configurations(scenario):
        try:
            decoder_run(scenario, config)
        except ValueError as exc:
            raise InputError(path, f"strategies.{index[config.strategy]}", str(exc)) from None
    if machine:
        ranks = max(config.devices for config in configurations(scenario))
        batch = largest_cache_memory(scenario, model)
        check_weights_fit(full_weight_bytes(model), ranks, path, WORKER, batch)


def largest_cache_memory(scenario: Scenario, model: DecoderSpec) -> BatchMemory:
    """The largest KV cache and activations of one device (single's, which the comparison
    runs too): its sweep's largest batch at its longest prompt + output, every layer's
    keys and values (allocated before the prefill) and a layer's activations at their
    peak (the prefill's or the last decode step's, docs/llm.md's Memory)."""
    workload, caches = scenario.decoder_workload, []
    for index, sweep in enumerate(scenario.sweeps):
        prompt, output = longest_generation(sweep, workload)
        batch, kept = max(sweep.batch), kept_positions(prompt, output)
        alone = registry.decoder_plan(
            registry.baseline().name, DecoderWorkload(model, 1, batch, prompt)
        )
        held = max(alone.transient_bytes(0), alone.transient_bytes(0, kept - 1))
        held += kv_bytes_per_token(model) * kept * batch
        what = "its KV cache and a layer's activations"
        caches.append(BatchMemory(f"sweeps.{index}.batch", batch, held, what))
    return max(caches, key=attrgetter("activation_bytes"))


def decoder_run(scenario: Scenario, config: Configuration) -> DecoderRun:
    """The real run of a configuration (a pipeline's layers: the scenario's, else the
    twin's split, ``fleet_layers``); ``ValueError`` if it cannot be done."""
    model = decoder_model(scenario)
    assert model is not None and config.prompt_tokens is not None
    assert config.output_tokens is not None
    segments, _ = resolve_segments(scenario, config)
    layers = next(s.layers for s in scenario.strategies if s.name == config.strategy)
    return DecoderRun(
        model,
        config.strategy,
        config.devices,
        config.prompt_tokens,
        config.output_tokens,
        config.batch,
        segments,
        tuple(layers) if layers else fleet_layers(scenario, config),
        scenario.seed,
    )


def decoder_rows(
    scenario: Scenario,
    threads: int,
    *,
    weights: Path | None = None,
    device: str = "cpu",
    timeout_s: float | None = None,
    configs: Sequence[Configuration] | None = None,
    launch: DecoderLauncher = launch_decoder,
    shaped: bool = False,
) -> Iterator[tuple[Configuration, list[ResultRow]]]:
    """Each configuration (default: all the scenario's) launched, with its rows.

    ``threads``: torch threads of every rank. ``launch``: what starts the ranks
    (loopback, or the emulator's hosts). Raises ``LaunchError`` if a rank fails or a
    launch's deadline (default: from its FLOPs, and with ``shaped`` links, the emulator's,
    its bytes at their rate) passes.
    """
    extra = [
        "--warmup",
        str(scenario.real_warmups),
        "--reps",
        str(scenario.repetitions),
        "--device",
        device,
    ]
    if weights is not None:
        extra += ["--weights", str(weights)]
    for config in configurations(scenario) if configs is None else configs:
        run = decoder_run(scenario, config)
        deadline_s = timeout_s or _deadline_s(scenario, config, run, shaped)
        records = launch(run, deadline_s, threads, extra)
        yield config, result_rows(scenario, config, run, records)


def result_rows(
    scenario: Scenario, config: Configuration, run: DecoderRun, records: Sequence[RankRecord]
) -> list[ResultRow]:
    """One row per timed generation of a launch (records in rank order)."""
    assert config.output_tokens is not None
    plan = decoder_plan(scenario, config, _stages(run))
    kept = kept_positions(run.prompt_tokens, run.output_tokens)
    tightest = plan.tightest(kept, fleet_ram_bytes(scenario, config.devices))
    tokens = config.batch * config.output_tokens
    rows = []
    for rep, got in enumerate(measured(records)):
        rows.append(
            ResultRow(
                **configuration_columns(scenario, config, plan.phases(config.output_tokens)),
                mode="local",
                rep=rep,
                compute_ms=got.compute_ms,
                staging_ms=got.staging_ms,
                comm_ms=got.comm_ms,
                total_ms=got.total_ms,
                per_sample_ms=got.total_ms / config.batch,
                energy_j=None,
                bytes_sent=got.bytes_sent,
                ttft_ms=got.ttft_ms,
                tpot_ms=got.tpot_ms,
                tokens_per_s=tokens / (got.total_ms / 1e3),
                weights_mb=tightest[0] / MB,
                kv_cache_mb=tightest[1] / MB,
                layer_split=layer_split(plan),
                max_abs_diff_vs_single=got.max_abs_diff_vs_single,
                prefix_agreement_vs_single=got.prefix_agreement_vs_single,
            )
        )
    return rows


def _stages(run: DecoderRun) -> tuple[int, ...] | None:
    """The layers per rank a layer split ran with (None for other strategies)."""
    return run.stage_layers if registry.strategy(run.strategy).splits_layers else None


def _deadline_s(scenario: Scenario, config: Configuration, run: DecoderRun, shaped: bool) -> float:
    """Every generation of the launch, every rank's FLOPs, and the last rank's
    single-device reference; with ``shaped`` links, their bytes at the links' rate and
    their messages at the links' latency."""
    assert config.output_tokens is not None
    phases = decoder_plan(scenario, config, _stages(run)).phases(config.output_tokens)
    generations = scenario.real_warmups + scenario.repetitions
    flops = generations * sum(phase_flops(phases, r) for r in range(config.devices))
    if config.devices > 1:
        alone = DecoderWorkload(run.spec, 1, run.batch, run.prompt_tokens)
        reference = registry.decoder_plan(registry.baseline().name, alone)
        flops += phase_flops(reference.phases(config.output_tokens), 0)
    sent = generations * contributed_bytes(phases)
    on_the_wire_s = wire_s(scenario, config, sent, generations * messages(phases))
    return launch_deadline_s(flops, on_the_wire_s if shaped else 0.0)
