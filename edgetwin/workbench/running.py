"""Running a scenario: the runner its mode asks for (twin, crowd twin, local processes,
emulator), and the output folder (``edgetwin run`` is a thin layer over ``run``)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from tempfile import gettempdir

from edgetwin.device_names import device_names
from edgetwin.errors import InputError
from edgetwin.links import LINK_CHECK_FILE
from edgetwin.network_spec import BandwidthStep
from edgetwin.number_text import counted
from edgetwin.progress import Progress, Steps, no_progress
from edgetwin.provenance import write_provenance
from edgetwin.reports.static import StaticFormat
from edgetwin.results import ResultRow
from edgetwin.run_folders import LOCAL, remove_leftovers
from edgetwin.run_warnings import write_warnings_file
from edgetwin.scenario import RUN_MODES, RunMode, Scenario
from edgetwin.scenario_paths import with_absolute_paths
from edgetwin.sim.crowd import crowd_runs, crowd_timelines, run_crowd
from edgetwin.sim.crowd.records import TIMELINE_FILE
from edgetwin.sim.fleet import build_fleet, unplayed_by_fleet, unplayed_in_twin
from edgetwin.sim.network import unplayed_schedule
from edgetwin.sim.runner import run_scenario, unplayed_of_ran, warms_up
from edgetwin.sim.trace import chrome_trace
from edgetwin.sweep_points import configurations
from edgetwin.unplayed_settings import unplayed_settings
from edgetwin.workbench.arguments import (
    choice_argument,
    flag_argument,
    out_argument,
    overrides_argument,
    path_argument,
    progress_argument,
    recorded_command,
    seed_argument,
    static_argument,
    width_argument,
)
from edgetwin.workbench.inputs import RunInputs, load_run_inputs, scenario_run_inputs
from edgetwin.workbench.output import output_folder, removed_if_killed, scratch_folder
from edgetwin.workbench.results import FORMATS, Format, Results
from edgetwin.workbench.run_files import FAULTS_FILE, TRACE_FILE, TRACES_DIR, read_run_files
from edgetwin.workbench.static_figures import static_export

_LOG = logging.getLogger(__name__)  # notices: what killed local runs left, removed


@dataclass
class _Run:
    """What a runner is given and what it reports besides its rows."""

    inputs: RunInputs
    staging: Path  # the runner's files (run_files.RUN_FILES, traces/) go here
    trace: bool
    progress: Steps
    warnings: list[str] = field(default_factory=list)
    played: Scenario | None = None  # the scenario as an emulator run played it (EmuRun.played)


def run(
    scenario: str | Path | Scenario,
    *,
    mode: RunMode | None = "twin",
    seed: int | None = None,
    overrides: Sequence[str] = (),
    out: str | Path | None = None,
    force: bool = False,
    trace: bool = False,
    format: Format = "csv",
    static: StaticFormat | None = None,
    width: str | None = None,
    progress: Progress | None = no_progress,
    command: Sequence[str] | None = None,
) -> Results:
    """Run a scenario (a file or a Scenario) and return its results.

    ``overrides`` are ``--set``-style ``key.sub=value`` items; ``seed`` and ``mode`` override
    the scenario's (``mode`` is ``"twin"`` unless given, where ``edgetwin run`` runs the
    scenario's own mode; ``mode=None`` runs the scenario's own). With ``out``, the folder gets
    what ``edgetwin run`` writes, all or nothing, with ``provenance.json`` (``command``: the
    command line, else this call); a non-empty ``out`` only with ``force`` (replaced whole).
    With ``trace``, the runs' timelines too; with ``static`` (``"svg"``, ``"pdf"``,
    ``"png"``), the report's figures as ``out/figures/<name>.<static>``, ``width`` wide
    (a failed export: ``out`` without them, then a FiguresNotDrawn); ``format``: the table
    as ``"csv"``, ``"parquet"`` or ``"both"``. ``progress(label, total)`` is told each run
    as it ends (``edgetwin.progress``; docs/api.md); ``None`` or the default shows nothing.
    """
    if mode is not None:
        choice_argument(mode, "mode", RUN_MODES)
    items = _run_overrides(overrides_argument(overrides), seed_argument(seed), mode)
    choice_argument(format, "format", FORMATS)
    force, trace = flag_argument(force, "force"), flag_argument(trace, "trace")
    if trace and out is None:  # the timelines are files in out: without it they were lost
        raise InputError(None, "trace", "the timelines are written into out: give out too")
    call = recorded_command(command, *_api_call(scenario, items))
    shows = progress_argument(progress)
    folder_out = out_argument(out)
    static = static_argument(static, folder_out)
    drawn_at = width_argument(width, static)
    inputs = _run_inputs(scenario, items)
    chosen = inputs.scenario
    if chosen.mode == "local":
        _remove_killed_local_runs()
    tracked = None if chosen.mode == "twin" else removed_if_killed(chosen.mode)
    folder = (
        scratch_folder(tracked)
        if folder_out is None
        else output_folder(folder_out, force, tracked, inputs=inputs.files)
    )
    with static_export(folder_out, static, drawn_at) as export, folder as staging:
        context = _Run(
            inputs, staging, trace, shows, warnings=unplayed_settings(chosen, chosen.mode)
        )
        rows = _runner(chosen)(context)
        write_warnings_file(staging, context.warnings)  # for the page, load_results, report
        played = context.played or chosen  # an emulator's congestion control named
        resolved = with_absolute_paths(played, inputs.named_from)  # re-runs from anywhere
        results = Results(
            tuple(rows),
            resolved,
            reference=inputs.reference,
            warnings=tuple(context.warnings),
            run_files=read_run_files(staging),  # kept: a scratch folder goes with the block
            device_names=device_names(resolved),
        )
        if out is not None:
            results.write_into(staging, format, runner_wrote=True)  # run_files are there
            export.draw(staging)
        # recorded without out too: Results.write then writes it, and a folder it wrote is
        # known as an edgetwin output (replaceable with force)
        recorded = write_provenance(staging, command=call, seed=chosen.seed, inputs=inputs.files)
        recorded_results = replace(results, provenance=recorded)
        export.result = recorded_results  # carried by a FiguresNotDrawn
    return recorded_results


def _remove_killed_local_runs() -> None:
    """Remove the temporary folders that local runs killed outright left (their owner is
    gone: ``run_folders``), and their staging folders beside an output folder, and say so
    on stderr, naming where."""
    removed = remove_leftovers(LOCAL)
    if removed:
        killed = "a killed local run" if len(removed) == 1 else "killed local runs"
        temp = Path(gettempdir())
        places = [str(temp), *sorted({str(p.parent) for p in removed if p.parent != temp})]
        _LOG.warning(
            "removed %s left by %s in %s",
            counted(len(removed), "folder"),
            killed,
            " and ".join(places),
        )


def _api_call(scenario: str | Path | Scenario, items: Sequence[str]) -> list[str]:
    """How a ``run`` call from Python is recorded: the function, the scenario, the overrides."""
    named = f"<Scenario {scenario.name}>" if isinstance(scenario, Scenario) else str(scenario)
    return ["edgetwin.run", named, *items]


def _run_inputs(scenario: str | Path | Scenario, items: Sequence[str]) -> RunInputs:
    """A scenario file or a Scenario, overridden by ``items`` and checked with its files."""
    if isinstance(scenario, Scenario):
        return scenario_run_inputs(scenario, items)
    return load_run_inputs(path_argument(scenario, "scenario"), items)


def _run_overrides(overrides: Sequence[str], seed: int | None, mode: RunMode | None) -> list[str]:
    """``overrides``, then the seed's and the mode's when given (the last one wins)."""
    items = [*overrides]
    if seed is not None:
        items.append(f"seed={seed}")
    if mode is not None:
        items.append(f"mode={mode}")
    return items


def check(
    scenario: str | Path | Scenario,
    *,
    mode: RunMode | None = None,
    seed: int | None = None,
    overrides: Sequence[str] = (),
    trace: bool = False,
) -> list[str]:
    """Check ``scenario`` (a file or a Scenario) for a run in ``mode`` without running it,
    as ``edgetwin run --check`` does: the scenario with ``overrides`` and ``seed`` (as for
    ``run``) and every file it names, then what the mode asks of the scenario itself (with
    a timeline if ``trace``), as its run checks when it starts; not what it asks of this
    machine (root, Mininet, free memory). ``mode=None`` (the default, unlike ``run``'s):
    the scenario's own. A crowd scenario in emu or local mode has its stages exported
    (seconds for the full model) and checked as its run checks them. Returns the warnings
    the run starts with (the settings its mode does not play; in the twin also those its
    devices' profiles cannot, a token bucket or ``sample_profiles``); what the run would
    refuse is an ``InputError``."""
    if mode is not None:
        choice_argument(mode, "mode", RUN_MODES)
    items = _run_overrides(overrides_argument(overrides), seed_argument(seed), mode)
    inputs = _run_inputs(scenario, items)
    return _check_mode(inputs, flag_argument(trace, "trace"))


def _check_mode(inputs: RunInputs, trace: bool) -> list[str]:
    """What the scenario's mode asks of the scenario itself (``check``), and the warnings
    its run starts with."""
    scenario, path = inputs.scenario, inputs.path
    if scenario.mode == "emu":
        from edgetwin.emu.mininet.runner import check_emulatable

        check_emulatable(scenario, path, machine=False)
    elif scenario.mode == "local" and scenario.crowd is not None:
        from edgetwin.emu.crowd_local import check_crowd_local

        check_crowd_local(scenario, path, machine=False, trace=trace)
    elif scenario.mode == "local":
        from edgetwin.emu.local import check_runnable

        check_runnable(scenario, path, machine=False, trace=trace)
    if scenario.mode != "twin" and scenario.crowd is not None:
        from edgetwin.emu.crowd_jobs import check_exported_stages_fit

        check_exported_stages_fit(scenario, path)
    if scenario.mode == "twin":  # and what its fleet's profiles cannot play, as _run_twin
        return unplayed_in_twin(scenario, path)
    return unplayed_settings(scenario, scenario.mode)


def _runner(scenario: Scenario) -> Callable[[_Run], list[ResultRow]]:
    if scenario.mode == "emu":
        return _run_emu
    if scenario.crowd is not None:
        return _run_crowd if scenario.mode == "twin" else _run_crowd_local
    return _run_twin if scenario.mode == "twin" else _run_local


def _run_twin(run: _Run) -> list[ResultRow]:
    scenario = run.inputs.scenario
    fleet = build_fleet(scenario, run.inputs.path)
    run.warnings += unplayed_by_fleet(scenario, fleet)
    total = len(configurations(scenario)) * scenario.repetitions
    with run.progress(f"twin {scenario.name}", total) as advance:
        try:
            outcomes = list(
                run_scenario(scenario, fleet, record_intervals=run.trace, on_progress=advance)
            )
        except InputError as exc:  # a configuration's values (a row that overflows)
            if exc.path is not None or run.inputs.path is None:
                raise
            raise InputError(run.inputs.path, exc.field, exc.problem) from None
    run.warnings += unplayed_schedule(unplayed_of_ran(outcomes), warms_up(scenario))
    if run.trace:
        (run.staging / TRACE_FILE).write_text(json.dumps(chrome_trace(outcomes)))
    return [o.row for o in outcomes]


def _files_absolute(inputs: RunInputs) -> Scenario:
    """The scenario with the files it names absolute: a real run reads its devices'
    profiles (a decoder pipeline's split) where it no longer knows the scenario's folder."""
    if inputs.path is None:  # given in Python: its paths are as given
        return inputs.scenario
    return with_absolute_paths(inputs.scenario, inputs.path)


def _run_local(run: _Run) -> list[ResultRow]:
    """Real code paths as local processes on loopback (torch is imported only here)."""
    from edgetwin.emu.local import check_runnable, run_local

    scenario = _files_absolute(run.inputs)
    check_runnable(scenario, run.inputs.path, trace=run.trace)
    trace_dir = run.staging / TRACES_DIR if run.trace else None
    total = len(configurations(scenario)) * scenario.repetitions
    with run.progress(f"local {scenario.name}", total) as advance:
        return run_local(scenario, advance, trace_dir=trace_dir)


def _run_crowd_local(run: _Run) -> list[ResultRow]:
    """The real CROWDio foreman and a worker process per phone, on loopback."""
    from edgetwin.emu.crowd_local import check_crowd_local, run_crowd_local

    scenario = run.inputs.scenario
    # the scenario and --trace before the progress starts; the run checks the machine
    check_crowd_local(scenario, run.inputs.path, machine=False, trace=run.trace)
    with run.progress(f"local {scenario.name}", len(crowd_runs(scenario))) as advance:
        return run_crowd_local(scenario, run.inputs.path, advance)


def _run_emu(run: _Run) -> list[ResultRow]:
    """Real code paths on Mininet hosts over shaped links; ``link_check.csv`` beside, and
    ``faults.csv`` when faults or a bandwidth schedule played; the scenario as played (the
    hosts' congestion control) for the resolved one. Warns when the hosts' CPU
    quotas add up to more than this machine's cores, and of faults and steps that never
    played."""
    from edgetwin.emu.mininet.checks import write_link_checks
    from edgetwin.emu.mininet.faults import write_faults
    from edgetwin.emu.mininet.runner import check_emulatable, emu_runs, host_cpu_warning, run_emu

    scenario, path = _files_absolute(run.inputs), run.inputs.path
    check_emulatable(scenario, path)
    cpu_warning = host_cpu_warning(scenario, path, os.cpu_count() or 1)
    if cpu_warning is not None:
        run.warnings.append(cpu_warning)
    with run.progress(f"emu {scenario.name}", emu_runs(scenario)) as advance:
        result = run_emu(scenario, path, advance, steps=run.progress)
    write_link_checks(run.staging / LINK_CHECK_FILE, result.links)
    if result.faults:
        write_faults(run.staging / FAULTS_FILE, result.faults)
    run.warnings.extend(result.warnings)
    run.played = result.played(run.inputs.scenario)
    if scenario.network.latency_ms > 0 and not all(c.latency_emulated for c in result.links):
        run.warnings.append("this kernel has no netem; latency_ms was not emulated")
    for check in result.links:
        for warning in (check.warning(), check.loss_warning()):
            if warning is not None:
                run.warnings.append(warning)
    return result.rows


def _run_crowd(run: _Run) -> list[ResultRow]:
    """The CROWDio pipeline over a fleet of phones in the twin; warns of schedule steps its
    runs ended before, as ``_run_twin`` (``warms_up``: a crowd run has no warm-up)."""
    scenario, path = run.inputs.scenario, run.inputs.path
    unplayed: list[tuple[BandwidthStep, ...]] = []
    with run.progress(f"crowd {scenario.name}", len(crowd_runs(scenario))) as advance:
        rows = run_crowd(scenario, path, on_progress=advance, unplayed=unplayed)
    run.warnings += unplayed_schedule(unplayed, warms_up(scenario))
    if run.trace:
        timeline = crowd_timelines(scenario, path).records()
        (run.staging / TIMELINE_FILE).write_text(json.dumps(timeline))
    return rows
