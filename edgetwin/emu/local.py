"""Run a scenario as real local processes (mode ``local``): the real ViT code paths (a
decoder scenario: the real decoder, ``emu.llm.local_rows``).

Configurations of one strategy and device count run in one launch of
``devices`` ranks on loopback (``emu.vit.launcher``) where they can: each
configuration gets warm-up forwards, then one timed forward per repetition.
Every rank gets the same share of the cores, single's too (one device's
compute). Rows carry what rank 0 measured (waiting for peers counts as comm),
the bytes every rank put into sends and collectives, and how the logits
compare with the whole model on the same input and weights. Local mode does
not shape the network: a row's ``bandwidth_mbps`` is the scenario's nominal
value, not what loopback gave.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Literal

from edgetwin.configuration import configuration_columns, resolve_segments, step_label
from edgetwin.emu.launch_deadline import launch_deadline_s, wire_s
from edgetwin.emu.llm.local_rows import check_decoder_runnable, decoder_model, decoder_rows
from edgetwin.emu.memory_check import BatchMemory, check_weights_fit
from edgetwin.emu.vit.launcher import OnRep, launch_local
from edgetwin.emu.vit.model import image_side
from edgetwin.emu.vit.records import RankRecord, RunRecord
from edgetwin.emu.vit.worker import model_args, real_strategies
from edgetwin.errors import MODE_TWIN, TRACE_ASKED, InputError
from edgetwin.models import registry
from edgetwin.models.costs import weight_bytes
from edgetwin.models.strategies import single
from edgetwin.models.strategy import VIT_WORKER
from edgetwin.progress import Step, naming
from edgetwin.results import ResultRow
from edgetwin.scenario import Scenario
from edgetwin.sweep_points import Configuration, configurations
from edgetwin.this_machine import available_cores

ELEMENT_BYTES = 4  # the real code paths run fp32

Device = Literal["cpu", "cuda"]
# starts the ranks of one launch: (worker args, world, timeout_s, threads, echo_rank0,
# on_rep: told (run index, rep) as rank 0 ends each timed forward)
Launcher = Callable[[Sequence[str], int, float, int | None, bool, OnRep | None], list[RankRecord]]


@dataclass(frozen=True)
class LocalRun:
    """One configuration as measured: one ``RunRecord`` per rank (rank order)."""

    config: Configuration
    ranks: tuple[RunRecord, ...]


def check_runnable(
    scenario: Scenario, path: Path | None = None, *, machine: bool = True, trace: bool = False
) -> None:
    """Raise ``InputError`` (naming ``path`` and the field) if local mode cannot run it,
    with a profiler trace if ``trace``; ``machine`` False checks the scenario only (not
    this machine's free memory)."""
    if decoder_model(scenario) is not None:
        if trace:
            raise InputError(
                path, None, f"{TRACE_ASKED}: the real decoder writes no profiler trace"
            )
        check_decoder_runnable(scenario, path, machine=machine)
        return
    try:
        image_side(scenario.encoder)
    except ValueError as exc:
        problem = (
            f"mode '{scenario.mode}' runs real code for a ViT encoder, a decoder or a crowd "
            f"scenario's ONNX stages; this model runs in the twin: use {MODE_TWIN}: {exc}"
        )
        raise InputError(path, "model", problem) from None
    if scenario.encoder.bytes_per_element != ELEMENT_BYTES:
        problem = f"mode '{scenario.mode}' runs fp32 ({ELEMENT_BYTES} bytes per element)"
        raise InputError(path, "model.bytes_per_element", problem)
    for index, strategy in enumerate(scenario.strategies):
        if strategy.name not in real_strategies():
            problem = (
                f"{strategy.name} has no real code path; mode '{scenario.mode}' runs "
                f"{real_strategies()}"
            )
            raise InputError(path, f"strategies.{index}.name", problem)
    for index, sweep in enumerate(scenario.sweeps):
        if max(sweep.devices) > scenario.encoder.tokens:
            problem = f"{max(sweep.devices)} devices for {scenario.encoder.tokens} tokens"
            raise InputError(path, f"sweeps.{index}.devices", problem)
    if machine:
        ranks = max(config.devices for config in configurations(scenario))
        batch = largest_batch_memory(scenario)
        check_weights_fit(weight_bytes(scenario.encoder), ranks, path, VIT_WORKER, batch)


def largest_batch_memory(scenario: Scenario) -> BatchMemory:
    """What the ranks of a run hold at once for the scenario's largest batch, at least: what
    one device holds at the peak of the whole forward (the twin's count,
    ``models/encoder_memory.py``), which the ranks of a split hold more than together."""
    model = scenario.encoder
    index, batch = max(enumerate(max(sweep.batch) for sweep in scenario.sweeps), key=itemgetter(1))
    one_device = registry.cost_plan(model, single.NAME, 1)
    what = "the input images and a whole forward's peak"
    activations = one_device.activation_bytes(0, batch, ELEMENT_BYTES)
    return BatchMemory(f"sweeps.{index}.batch", batch, activations, what)


def run_local(
    scenario: Scenario,
    on_progress: Step | None = None,
    *,
    weights: Path | None = None,
    device: Device = "cpu",
    timeout_s: float | None = None,
    trace_dir: Path | None = None,
    threads: int | None = None,
) -> list[ResultRow]:
    """Every configuration x repetition as real processes, each configuration after the
    scenario's ``real_warmups`` untimed forwards; rows in configuration order.

    ``on_progress``: told each repetition as it ends (its ``step_label`` if it takes one).

    ``weights``: a state_dict (timm ViT names) instead of seeded random weights.
    ``timeout_s``: deadline of each launch (default: generous, from the FLOPs to do).
    ``trace_dir``: also write a PyTorch profiler Chrome trace per rank and configuration.
    ``threads``: torch threads per rank (default: an equal share for every device, see
    ``device_threads``).
    A decoder scenario runs the real decoder (``emu.llm.local_rows``; no ``trace_dir``).
    Raises ``InputError`` for what local mode cannot run and ``LaunchError`` if a rank fails.
    """
    rows_by_config: dict[Configuration, list[ResultRow]] = {}
    tell = told_repetitions(on_progress)
    if decoder_model(scenario) is not None:
        check_runnable(scenario, trace=trace_dir is not None)
        if weights is not None and not weights.is_file():
            raise InputError(weights, None, "weights file not found")
        threads = threads or device_threads(scenario)
        measured = decoder_rows(
            scenario, threads, weights=weights, device=device, timeout_s=timeout_s
        )
        for config, rows in measured:
            rows_by_config[config] = rows
            for row in rows:
                if tell is not None:
                    tell(config, row.rep)
    else:
        runs = measure_local(
            scenario,
            weights,
            device,
            timeout_s,
            trace_dir,
            threads=threads,
            on_rep=tell,
        )
        rows_by_config = {run.config: result_rows(scenario, run) for run in runs}
    return [row for config in configurations(scenario) for row in rows_by_config[config]]


def told_repetitions(on_progress: Step | None) -> Callable[[Configuration, int], None] | None:
    """``on_progress`` told a configuration's repetition by its ``step_label`` (None:
    nothing to tell, no label built)."""
    if on_progress is None:
        return None
    advance = naming(on_progress)
    return lambda config, rep: advance(step_label(config, rep))


def measure_local(
    scenario: Scenario,
    weights: Path | None = None,
    device: Device = "cpu",
    timeout_s: float | None = None,
    trace_dir: Path | None = None,
    trace_batch: int | None = None,
    echo_rank0: bool = False,
    threads: int | None = None,
    *,
    configs: Sequence[Configuration] | None = None,
    launch: Launcher = launch_local,
    on_rep: Callable[[Configuration, int], None] | None = None,
    shaped: bool = False,
) -> Iterator[LocalRun]:
    """The measurements behind ``run_local``, launch by launch.

    ``trace_batch``: trace only configurations of this batch size. ``echo_rank0``: rank 0
    prints one line per configuration to stdout (progress). ``configs``: only these of the
    scenario's configurations. ``launch``: what starts the ranks (the emulator's hosts).
    ``on_rep``: told each configuration's repetition as rank 0 ends it, during its launch.
    ``shaped``: the links run at the configurations' rates (the emulator's), and each
    launch's default deadline allows for its bytes at them.
    """
    check_runnable(scenario)
    if weights is not None and not weights.is_file():
        raise InputError(weights, None, "weights file not found")
    threads = threads or device_threads(scenario)
    for group in _launches(scenario, configs):
        args = [
            *("--strategy", group.strategy, "--batch", *map(str, group.batches)),
            *(("--segments", *map(str, group.segments)) if group.segments != (None,) else ()),
            *("--reps", str(scenario.repetitions), "--warmup", str(scenario.real_warmups)),
            *("--seed", str(scenario.seed), "--input-source", scenario.input_source),
            *("--device", device),
            *(() if weights is None else ("--weights", str(weights))),
            *(() if trace_dir is None else ("--trace-dir", str(trace_dir))),
            *(() if trace_batch is None else ("--trace-batch", str(trace_batch))),
            *model_args(scenario.encoder),
        ]
        deadline_s = timeout_s or _deadline_s(scenario, group, shaped)
        told = None if on_rep is None else _by_configuration(group, on_rep)
        records = launch(args, group.devices, deadline_s, threads, echo_rank0, told)
        for index, config in enumerate(group.configs):
            yield LocalRun(config, tuple(record.runs[index] for record in records))


def _by_configuration(group: _Launch, on_rep: Callable[[Configuration, int], None]) -> OnRep:
    """A launch's reports (run index, rep) as its configuration's."""
    return lambda run_index, rep: on_rep(group.configs[run_index], rep)


def device_threads(scenario: Scenario) -> int:
    """Torch threads of every rank: the cores shared evenly by the most devices any
    configuration uses, so every rank, single's included, emulates a device of equal
    compute."""
    most = max(config.devices for config in configurations(scenario))
    return max(1, available_cores() // most)


def result_rows(scenario: Scenario, run: LocalRun) -> list[ResultRow]:
    """One results row per repetition: rank 0's phases, every rank's bytes, vs single."""
    config, terminal = run.config, run.ranks[0]
    return [
        ResultRow(
            **configuration_columns(scenario, config),
            mode="local",
            rep=rep,
            compute_ms=timing.phase_ms("compute"),
            staging_ms=timing.staging_ms,
            comm_ms=timing.phase_ms("comm"),
            total_ms=timing.total_ms,
            per_sample_ms=timing.total_ms / config.batch,
            energy_j=None,
            bytes_sent=sum(rank.bytes_sent_per_forward for rank in run.ranks),
            max_abs_diff_vs_single=terminal.max_abs_diff_vs_single,
            top1_agreement_vs_single=terminal.top1_agreement_vs_single,
        )
        for rep, timing in enumerate(terminal.reps)
    ]


@dataclass(frozen=True)
class _Launch:
    """One launch: runs are every ``segments`` value x every ``batches`` entry, in that
    order, one configuration each (``configs`` in the same order)."""

    strategy: str
    devices: int
    segments: tuple[int | None, ...]
    batches: tuple[int, ...]
    configs: tuple[Configuration, ...]


def _launches(scenario: Scenario, configs: Sequence[Configuration] | None = None) -> list[_Launch]:
    """Configurations (default: all the scenario's) grouped into as few launches as the
    worker's runs (a product) allow.

    A batch size appears once per configuration (a configuration differing only in its
    nominal bandwidth is a run of its own); segment values with the same batch list share
    a launch.
    """
    per_segments: dict[tuple[str, int, int | None], list[Configuration]] = {}
    for config in configurations(scenario) if configs is None else configs:
        segments, _ = resolve_segments(scenario, config)
        per_segments.setdefault((config.strategy, config.devices, segments), []).append(config)
    grouped: dict[tuple[str, int, tuple[int, ...]], list[tuple[int | None, list[Configuration]]]]
    grouped = {}
    for (strategy, devices, segments), configs in per_segments.items():
        batches = tuple(config.batch for config in configs)
        grouped.setdefault((strategy, devices, batches), []).append((segments, configs))
    return [
        _Launch(
            strategy,
            devices,
            tuple(segments for segments, _ in members),
            batches,
            tuple(config for _, configs in members for config in configs),
        )
        for (strategy, devices, batches), members in grouped.items()
    ]


def _deadline_s(scenario: Scenario, launch: _Launch, shaped: bool) -> float:
    """Start-up allowance plus every forward of the launch (and rank 0's single reference)
    at the speed of a slow host; with ``shaped`` links, their bytes at the links' rate and
    their messages at the links' latency."""
    model = scenario.encoder
    single = registry.cost_plan(model, registry.baseline().name, 1).flops_per_sample(
        0, model.blocks
    )
    forwards = scenario.real_warmups + scenario.repetitions + 1  # + one traced forward
    row_bytes = model.width * ELEMENT_BYTES
    flops = on_the_wire_s = 0.0
    for config in launch.configs:
        segments, _ = resolve_segments(scenario, config)
        work = registry.cost_plan(
            model, config.strategy, config.devices, segments, scenario.input_source
        )
        per_sample = sum(work.flops_per_sample(r, model.blocks) for r in range(config.devices))
        flops += config.batch * (forwards * per_sample + single)
        sent = forwards * work.contributed_bytes(config.batch, model.blocks, row_bytes)
        messages = forwards * work.messages(model.blocks)
        on_the_wire_s += wire_s(scenario, config, sent, messages) if shaped else 0.0
    return launch_deadline_s(flops, on_the_wire_s)
