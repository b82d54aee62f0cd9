"""A crowd scenario's real pipeline on loopback (``--mode local``): the CROWDio foreman and
one ONNX Runtime worker process per phone on this machine, one job per run.

Runs go repetition by repetition (``in_turn``; rows in ``crowd_runs``' order), each on a
fresh foreman and fresh workers, caches empty (``cache: cold``) or holding every stage
(``warm``). Nothing is shaped: a row's ``bandwidth_mbps`` is its run's nominal value, and
the phones share this machine's cores (each worker keeps to its class's session budget
and reports battery with its power model). The emulator's faults act on links and
hosts, which loopback does not have: a scenario with faults is refused.
"""

from __future__ import annotations

from pathlib import Path

from edgetwin.configuration import CrowdRun, crowd_runs, in_turn, run_label
from edgetwin.emu.crowd_jobs import CrowdJobs, check_crowd_jobs, check_phones_fit
from edgetwin.emu.crowdio.launcher import LocalPlacement
from edgetwin.emulator_spec import JOB_TIMEOUT_S
from edgetwin.errors import MODE_EMU, TRACE_ASKED, InputError
from edgetwin.progress import Step, naming
from edgetwin.results import ResultRow
from edgetwin.run_folders import LOCAL, run_folder
from edgetwin.scenario import Scenario


def check_crowd_local(
    scenario: Scenario, scenario_path: Path | None, *, machine: bool = True, trace: bool = False
) -> None:
    """``InputError`` naming the field if ``--mode local`` cannot run this crowd scenario
    (with a timeline if ``trace``); ``machine`` False checks the scenario only (not this
    machine's free memory)."""
    if trace:
        problem = (
            f"{TRACE_ASKED}: the real pipeline writes no timeline (a crowd run in the twin does)"
        )
        raise InputError(scenario_path, None, problem)
    check_crowd_jobs(scenario, scenario_path)
    if scenario.emulator.faults:
        problem = f"faults take down links and hosts: they play in {MODE_EMU} only"
        raise InputError(scenario_path, "emulator.faults", problem)
    if machine:
        check_phones_fit(scenario, scenario_path)


def run_crowd_local(
    scenario: Scenario,
    scenario_path: Path | None = None,
    on_progress: Step | None = None,
    *,
    timeout_s: float = JOB_TIMEOUT_S,
) -> list[ResultRow]:
    """Every run of a crowd scenario on loopback, one row per run (its job), mode local;
    ``on_progress`` is told each run as it ends (its ``run_label`` if it takes one).

    Raises ``InputError`` for what local mode cannot run and ``CrowdJobFailed`` when a job
    does not finish (a deadline passed, the foreman failed it, a process did not start)."""
    check_crowd_local(scenario, scenario_path)
    runs = crowd_runs(scenario)
    rows: dict[CrowdRun, ResultRow] = {}
    advance = naming(on_progress)
    with run_folder(LOCAL, "crowd") as scratch:
        jobs = CrowdJobs.prepare(scenario, scenario_path, Path(scratch))
        for run in in_turn(runs):
            summary = jobs.run(run, LocalPlacement(), timeout_s)
            rows[run] = jobs.row(run, summary, "local")
            advance(run_label(run))
    return [rows[run] for run in runs]
