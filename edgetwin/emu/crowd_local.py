"""A crowd scenario's real pipeline on loopback (``--mode local``): the CROWDio foreman and
one ONNX Runtime worker process per phone on this machine, one job per run.

Runs go as ``crowd_runs`` says (bandwidth x strategy x scheduler x repetition), each on a
fresh foreman and fresh workers, caches empty (``cache: cold``) or holding every stage
(``warm``). Nothing is shaped: a row's ``bandwidth_mbps`` is its run's nominal value, and
the phones share this machine's cores (each worker keeps to its class's session budget
and reports battery with its power model). The emulator's faults act on links and
hosts, which loopback does not have: a scenario with faults is refused.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from edgetwin.configuration import crowd_runs
from edgetwin.emu.crowd_jobs import (
    JOB_TIMEOUT_S,
    MODELS,
    CrowdJobFailed,
    check_crowd_jobs,
    crowd_phones,
    fill_caches,
    phones_bytes,
    run_job,
    run_label,
    worker_specs,
)
from edgetwin.emu.crowdio.launcher import LocalPlacement, run_pipeline
from edgetwin.emu.crowdio.liveness import LivenessRule
from edgetwin.emu.crowdio.model import export_stages, make_inputs
from edgetwin.emu.crowdio.rows import summary_row
from edgetwin.emu.crowdio.sdk import JobError
from edgetwin.emu.memory_check import check_fits
from edgetwin.errors import InputError, LaunchError
from edgetwin.results import ResultRow
from edgetwin.scenario import Scenario


def check_crowd_local(
    scenario: Scenario, scenario_path: Path | None, *, machine: bool = True, trace: bool = False
) -> None:
    """``InputError`` naming the field if ``--mode local`` cannot run this crowd scenario
    (with a timeline if ``trace``); ``machine`` False checks the scenario only (not this
    machine's free memory)."""
    if trace:
        problem = "the real pipeline writes no timeline (a crowd run in the twin does)"
        raise InputError(scenario_path, "--trace", problem)
    check_crowd_jobs(scenario, scenario_path)
    if scenario.emulator.faults:
        problem = "faults take down links and hosts: they play in --mode emu only"
        raise InputError(scenario_path, "emulator.faults", problem)
    if machine:
        what = "the phones' workers and the first stage's weights on each (the job's broadcast)"
        check_fits(phones_bytes(scenario, scenario_path), scenario_path, "crowd.fleet", what)


def run_crowd_local(
    scenario: Scenario,
    scenario_path: Path | None = None,
    on_progress: Callable[[], None] | None = None,
    *,
    timeout_s: float = JOB_TIMEOUT_S,
) -> list[ResultRow]:
    """Every run of a crowd scenario on loopback, one row per run (its job), mode local.

    Raises ``InputError`` for what local mode cannot run and ``CrowdJobFailed`` when a job
    does not finish (a deadline passed, the foreman failed it, a process did not start)."""
    check_crowd_local(scenario, scenario_path)
    crowd = scenario.crowd
    assert crowd is not None
    emulator = scenario.emulator
    workers = worker_specs(crowd_phones(scenario, scenario_path), emulator.task_delay_ms)
    liveness = LivenessRule(emulator.heartbeat_s, emulator.silence_timeout_s)
    config = MODELS[emulator.model]
    rows = []
    with tempfile.TemporaryDirectory(prefix="edgetwin-crowd-") as scratch:
        root = Path(scratch)
        stages = export_stages(config, len(crowd.job.stages), scenario.seed, root)
        inputs = make_inputs(config, crowd.job.inputs, scenario.seed)
        cache_root = root / "cache" if crowd.cache == "warm" else None
        if cache_root is not None:
            fill_caches(stages, workers, cache_root)
        for run in crowd_runs(scenario):
            try:
                summary = run_pipeline(
                    run_job(scenario, run, stages, inputs),
                    workers,
                    LocalPlacement(),
                    cache_root=cache_root,
                    timeout_s=timeout_s,
                    liveness=liveness,
                    work_root=root,
                )
            except (TimeoutError, JobError, LaunchError) as exc:
                problem = "timed out" if isinstance(exc, TimeoutError) else "failed"
                raise CrowdJobFailed(f"CROWDio job {run_label(run)} {problem}: {exc}") from exc
            rows.append(
                summary_row(
                    summary,
                    scenario=scenario.name,
                    bandwidth_mbps=run.bandwidth_mbps,
                    rep=run.rep,
                    mode="local",
                )
            )
            if on_progress is not None:
                on_progress()
    return rows
