"""The affinity evaluation in the emulator: the real foreman's schedulers on Mininet hosts.

Each instance runs once per scheduler and repetition with ``run_crowd_emu`` (the
real CROWDio foreman on host 0, a worker per phone on its CPU-limited host). The
optimum is not the twin's: ``emu_costs`` measures the offline model's costs in
those same runs (every scheduler's jobs of the instance), and the optimum and
each scheduler's assignment are timed with them. Regret = (mean measured makespan -
optimum) / optimum. Each scheduler's real assignments are also timed in the model
(loads at dispatch): with the costs of all the runs (the optimum's; at least the
optimum) and each with its own run's costs (how well the model reproduces a run).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from statistics import fmean

from edgetwin.configuration import crowd_runs
from edgetwin.emu.crowdio.records import PipelineSummary
from edgetwin.errors import InputError
from edgetwin.evaluate.affinity_results import (
    AssignmentReplay,
    InstanceResult,
    RunFigures,
    SchedulerResult,
    scheduler_result,
)
from edgetwin.evaluate.emu_costs import (
    MeasuredInstance,
    MeasuredSamples,
    assignment_of_summary,
    measured_instance,
    replay_with_own_costs,
)
from edgetwin.evaluate.optimum import Optimum, evaluate_assignment, optimum
from edgetwin.models import registry
from edgetwin.scenario import Scenario


def check_emu_instance(
    scenario: Scenario, scenario_path: Path, where: tuple[Path, str], machine: bool = True
) -> None:
    """``InputError`` if the emulator cannot evaluate this instance (``where``: file, field;
    ``machine``: as ``check_emulatable``'s)."""
    from edgetwin.emu.mininet.runner import check_emulatable

    crowd = scenario.crowd
    assert crowd is not None
    if crowd.cache != "cold":
        problem = "crowd.cache must be cold in the emulator (the warm-up job's caches are unknown)"
        raise InputError(*where, problem)
    if scenario.emulator.faults:
        raise InputError(*where, "faults are not modelled by the optimum")
    check_emulatable(scenario, scenario_path, machine=machine)


def emu_warnings(name: str, scenario: Scenario, scenario_path: Path) -> list[str]:
    """What ``edgetwin run --mode emu`` would warn of, prefixed with the instance's name: hosts'
    CPU quotas past this machine's cores. Its jobs' own warnings (faults and schedule steps
    they ended before) cannot arise: ``check_emu_instance`` and the settings refuse both."""
    from edgetwin.emu.mininet.runner import host_cpu_warning

    warning = host_cpu_warning(scenario, scenario_path, os.cpu_count() or 1)
    return [] if warning is None else [f"{name}: {warning}"]


def evaluate_instance_emu(
    name: str, scenario: Scenario, scenario_path: Path, node_limit: int
) -> list[InstanceResult]:
    """Every scheduler's runs of one instance in the emulator, per strategy, with the optima
    of the costs those runs measured."""
    from edgetwin.emu.mininet.crowd import run_crowd_emu

    summaries = run_crowd_emu(scenario, scenario_path, link_check_s=0).summaries
    return evaluate_runs_emu(name, scenario, scenario_path, summaries, node_limit)


def evaluate_runs_emu(
    name: str,
    scenario: Scenario,
    scenario_path: Path,
    summaries: Sequence[PipelineSummary],
    node_limit: int,
) -> list[InstanceResult]:
    """The instance's results from its jobs (``run_crowd_emu``'s summaries, in run order)."""
    from edgetwin.emu.crowd_jobs import crowd_phones

    crowd = scenario.crowd
    assert crowd is not None
    names = tuple(p.name for p in crowd_phones(scenario, scenario_path))
    blob_bytes = stage_blob_bytes(scenario)
    results = []
    for strategy, per_scheduler in runs_by_strategy(scenario, summaries).items():
        samples = MeasuredSamples()
        for runs in per_scheduler.values():
            for summary in runs:
                samples.add(summary, names)
        barrier = registry.pipeline(strategy) == "barrier"
        measured = measured_instance(samples, names, blob_bytes, barrier, crowd.job.inputs)
        inst = measured.instance
        best = optimum(inst, node_limit)
        dispatch = optimum(inst, node_limit, prefetch=False)
        results.append(
            InstanceResult(
                name,
                strategy,
                names,
                crowd.job.inputs,
                len(crowd.job.stages),
                crowd.cache,
                best,
                dispatch,
                {
                    scheduler: _scheduler_result(
                        measured, names, runs, (best, dispatch), blob_bytes
                    )
                    for scheduler, runs in per_scheduler.items()
                },
                (measured.placements_measured, measured.placements),
            )
        )
    return results


def _scheduler_result(
    measured: MeasuredInstance,
    phones: Sequence[str],
    runs: Sequence[PipelineSummary],
    optima: tuple[Optimum, Optimum],
    blob_bytes: Sequence[int],
) -> SchedulerResult:
    """A scheduler's measured runs, and its assignments timed in the model (loads at dispatch)."""
    inst = measured.instance
    assignments = tuple(assignment_of_summary(s, phones) for s in runs)
    replay = AssignmentReplay(
        assignments,
        pooled_s=fmean(
            evaluate_assignment(inst, assignment).makespan_ms for assignment in assignments
        )
        / 1e3,
        own_s=fmean(
            replay_with_own_costs(s, phones, blob_bytes, inst.barrier).makespan_ms for s in runs
        )
        / 1e3,
    )
    return scheduler_result([_figures(s) for s in runs], *optima, replay)


def _figures(summary: PipelineSummary) -> RunFigures:
    return RunFigures(
        summary.pipeline_latency_ms / 1e3,
        summary.cold_loads,
        summary.warm_loads,
        summary.evictions,
        summary.bytes_moved,
    )


def stage_blob_bytes(scenario: Scenario) -> list[int]:
    """The size of each real ONNX stage the emulator sends (exported as it does)."""
    from edgetwin.emu.crowd_jobs import MODELS
    from edgetwin.emu.crowdio.model import export_stages

    assert scenario.crowd is not None
    config = MODELS[scenario.emulator.model]
    return [
        len(s.blob) for s in export_stages(config, len(scenario.crowd.job.stages), scenario.seed)
    ]


def runs_by_strategy(
    scenario: Scenario, summaries: Sequence[PipelineSummary]
) -> dict[str, dict[str, list[PipelineSummary]]]:
    """strategy -> scheduler -> its jobs' summaries (repetitions in order)."""
    grouped: dict[str, dict[str, list[PipelineSummary]]] = {}
    for run, summary in zip(crowd_runs(scenario), summaries, strict=True):
        grouped.setdefault(run.strategy, {}).setdefault(run.scheduler, []).append(summary)
    return grouped
