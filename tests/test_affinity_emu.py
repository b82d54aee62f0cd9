"""The affinity evaluation on the real foreman: costs from its records, the optimum under them,
and (root + Mininet) the emulator evaluation end to end (docs/affinity.md)."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from emu_checks import teardown_checked

from edgetwin.emu.crowdio.launcher import run_pipeline_local
from edgetwin.emu.crowdio.model import TINY, export_stages, make_inputs
from edgetwin.emu.crowdio.records import PipelineSummary
from edgetwin.emu.crowdio.sdk import pipeline_job
from edgetwin.emu.mininet.mn import missing_requirements
from edgetwin.errors import InputError
from edgetwin.evaluate.affinity import AffinityEvaluation, load_affinity_settings
from edgetwin.evaluate.emu_costs import (
    MeasuredSamples,
    assignment_of_summary,
    measured_instance,
    replay_with_own_costs,
)
from edgetwin.evaluate.optimum import evaluate_assignment, optimum
from edgetwin.reports.affinity import write_affinity_report

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "scenarios" / "affinity_emu.eval.yaml"
WORKERS = ("worker-0", "worker-1", "worker-2")
STAGES = export_stages(TINY, 3, 0)
needs_emulator = pytest.mark.skipif(
    bool(missing_requirements()), reason=f"emulator needs: {missing_requirements()}"
)


def assert_each_task_once(summary: PipelineSummary) -> None:
    """Every (input, stage) completed exactly once, by the foreman's records."""
    done = Counter((e.input_index, e.stage_index) for e in summary.events if e.kind == "complete")
    stages = len(summary.stages)
    assert done == Counter({(i, s): 1 for i in range(summary.inputs) for s in range(stages)})


def assert_cold_loads_from_workers(summary: PipelineSummary) -> None:
    """The job's cold loads are the workers' own ``loaded ... cold`` replies, and with empty
    caches every stage a worker ran was first loaded cold there."""
    replies = [e for e in summary.events if e.kind == "loaded"]
    assert summary.cold_loads == sum(e.detail == "cold" for e in replies)
    cold = {(e.worker, e.stage_index) for e in replies if e.detail == "cold"}
    assert {(t.worker, t.stage_index) for t in summary.tasks} <= cold


@pytest.fixture(scope="module")
def local_runs() -> list[PipelineSummary]:
    """Two schedulers on the real foreman over loopback, cold caches, uneven workers."""
    inputs = make_inputs(TINY, 2, 0)
    return [
        run_pipeline_local(
            pipeline_job(STAGES, inputs, scheduler=scheduler),
            workers=len(WORKERS),
            task_delay_ms=[40.0, 10.0, 0.0],
        )
        for scheduler in ("fifo", "least_loaded")
    ]


def test_optimum_of_measured_costs_is_below_every_plan(local_runs: list[PipelineSummary]) -> None:
    samples = MeasuredSamples()
    for summary in local_runs:
        assert_each_task_once(summary)
        assert_cold_loads_from_workers(summary)
        samples.add(summary, WORKERS)
    measured = measured_instance(samples, WORKERS, [len(s.blob) for s in STAGES], False, 2)
    inst = measured.instance
    best = optimum(inst)
    assert best.proved and measured.placements_measured >= 3
    for summary in local_runs:
        assignment = assignment_of_summary(summary, WORKERS)
        assert sorted(t for tasks in assignment for t in tasks) == [
            (i, s) for i in (0, 1) for s in (0, 1, 2)
        ]
        used = {(w, s) for w, tasks in enumerate(assignment) for _, s in tasks}
        assert all(inst.phones[w].fits[s] for w, s in used)  # every placement it used measured
        replayed = evaluate_assignment(inst, assignment, prefetch=True)
        assert best.schedule.makespan_ms <= replayed.makespan_ms + 1e-9
        # with its own costs, the model gives the run's makespan (measured: within 3 %,
        # docs/affinity.md); the foreman's own overhead is not in the model, and other load
        # only adds to it, so the test holds the model to no more than the run took
        own = replay_with_own_costs(summary, WORKERS, [len(s.blob) for s in STAGES], False)
        assert 0 < own.makespan_ms <= 1.1 * summary.pipeline_latency_ms
    # the task delay is in the measured work: the slow worker's tasks take >= 40 ms
    slow = [inst.phones[0].work_ms[s] for s in range(3) if inst.phones[0].fits[s]]
    assert all(w >= 40.0 for w in slow)


@pytest.mark.parametrize(
    ("override", "says", "twin_takes_it"),
    [
        ("crowd.cache=warm", "cold", True),  # the twin knows a warm cache; the emulator not
        ("'sweeps=[{bandwidth_mbps: [10, 100]}]'", "one bandwidth", False),  # the optimum's
        # with no faults (nor network.schedule) no job has a step to miss: a run never warns
        ("'emulator.faults=[{kind: kill_worker, host: 1, at_s: 1}]'", "faults", True),
    ],
)
def test_emu_settings_refuse_what_the_optimum_cannot_model(
    tmp_path: Path, override: str, says: str, twin_takes_it: bool
) -> None:
    spec = tmp_path / "bad.eval.yaml"
    spec.write_text(
        f"scenario: {ROOT / 'scenarios' / 'affinity_emu.yaml'}\nmode: emu\n"
        f"instances: [{{name: bad, set: [{override}]}}]\n"
    )
    with pytest.raises(InputError) as err:
        load_affinity_settings(spec)
    assert err.value.field == "instances.0" and says in err.value.message
    if twin_takes_it:
        assert load_affinity_settings(spec, "twin")[0].mode == "twin"
    else:
        with pytest.raises(InputError, match=says):
            load_affinity_settings(spec, "twin")


@needs_emulator
def test_emulator_evaluation_end_to_end(tmp_path: Path) -> None:
    from edgetwin.emu.mininet.crowd import run_crowd_emu
    from edgetwin.evaluate.affinity_emu import evaluate_runs_emu

    settings, scenarios = load_affinity_settings(EVAL)
    scenario, path = scenarios[0]
    scenario = scenario.model_copy(update={"repetitions": 1})
    with teardown_checked() as teardown:
        summaries = run_crowd_emu(scenario, path, link_check_s=0, timeout_s=120).summaries
    teardown.assert_clean()
    assert [s.scheduler for s in summaries] == list(settings.schedulers)
    for summary in summaries:
        assert_each_task_once(summary)
        assert_cold_loads_from_workers(summary)
    (result,) = evaluate_runs_emu("p3_n2_s3", scenario, path, summaries, settings.node_limit)
    assert result.optimum.proved
    best_s = result.optimum.schedule.makespan_ms / 1e3
    assert best_s <= result.optimum_dispatch.schedule.makespan_ms / 1e3 + 1e-12
    for name, summary in zip(settings.schedulers, summaries, strict=True):
        figures = result.schedulers[name]
        assert figures.cold_loads == summary.cold_loads
        assert figures.makespan_s == summary.pipeline_latency_ms / 1e3
        assert figures.replay is not None and best_s <= figures.replay.pooled_s
        # measured: own costs give the run within -14 % to +4 % (CPU quotas, shared cores);
        # other load adds overhead the model does not have, so only the upper side is held,
        # at the 30 % docs/affinity.md says (+15 % came once, beside the rest of the suite)
        assert 0 < figures.replay.own_s <= 1.3 * figures.makespan_s
    write_affinity_report(tmp_path, AffinityEvaluation(settings, (result,)))
    assert "Its plans under the measured costs" in (tmp_path / "affinity.html").read_text()
    assert json.loads((tmp_path / "affinity.json").read_text())["mode"] == "emu"


@needs_emulator
def test_emu_evaluation_warns_of_cpu_quotas_over_the_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """cpu_cores_fastest = this machine's cores gives the hosts 1.75 times them: ``edgetwin
    run --mode emu`` warns of it, and so does the evaluation (one job; it said nothing)."""
    from edgetwin.cli import main

    spec = tmp_path / "over.eval.yaml"
    over = f"emulator.cpu_cores_fastest={os.cpu_count() or 1}"
    spec.write_text(
        f"scenario: {ROOT / 'scenarios' / 'affinity_emu.yaml'}\nmode: emu\nschedulers: [fifo]\n"
        f"repetitions: 1\ninstances: [{{name: over, set: [{over}]}}]\n"
    )
    command = ["evaluate-affinity", str(spec), "--out", str(tmp_path / "out"), "--quiet"]
    with teardown_checked() as teardown:
        assert main(command) == 0
    teardown.assert_clean()
    warning = "edgetwin: warning: over: emulator.cpu_cores_fastest gives the hosts CPU quotas"
    assert warning in capsys.readouterr().err


def test_cli_mode_emu_overrides_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from edgetwin.cli import main

    twin_file = ROOT / "scenarios" / "affinity_small.eval.yaml"  # warm caches, shared WiFi
    out = tmp_path / "out"
    assert main(["evaluate-affinity", str(twin_file), "--mode", "emu", "--out", str(out)]) == 2
    message = capsys.readouterr().err
    assert str(twin_file) in message and "instances.0" in message and "cold" in message
    assert not out.exists()
