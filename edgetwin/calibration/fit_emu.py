"""A profile of this machine from an emulator run (``kind: emu`` calibration specs).

The folder ``edgetwin run --mode emu`` writes holds what the fit needs:
``results.csv`` (rank 0's compute, staging and communication per configuration
and repetition), ``link_check.csv`` (what iperf3 carried over each shaped link)
and ``scenario.resolved.yaml`` (the model and network the ranks ran). The
link check gives the share of the link rate a TCP stream carries (htb shapes
whole frames: headers take ~4.4 %), which is fixed, not fitted. The timing
parameters are fitted as for a measured table (``fit_reference``): the twin
replays every emulated configuration and least squares moves the parameters,
against each configuration's fastest repetition, by asymmetric least squares
(the 0.1-expectile of the log errors): other load on the machine slows runs and
never speeds them up, so the fit follows the undisturbed ones.
Every rank of the emulator runs on this machine's CPU cores, so the
parameters are those of a CPU: the host is the device (no separate host side
of a block, no GPU copy), host copies cost linearly in bytes, and there is no
power meter (powers are 0).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from statistics import median
from typing import Any, Literal

from pydantic import Field

from edgetwin.atomic import write_text_atomic
from edgetwin.calibration.fit_check import (
    TooFewPoints,
    at_bound,
    at_bound_block,
    not_pinned,
    not_pinned_block,
)
from edgetwin.calibration.fit_reference import residual_report
from edgetwin.calibration.profile_io import (
    FIXABLE_SECTIONS,
    ProfileFacts,
    check_fixed,
    check_measured,
    host_ram_mb,
    source_record,
    write_profile,
)
from edgetwin.calibration.reference_fitter import fit_measured
from edgetwin.calibration.reference_inputs import (
    TIMING_PARAMETERS,
    MeasuredRow,
    Parameter,
    read_measured,
    too_few_points_error,
)
from edgetwin.csv_rows import read_rows
from edgetwin.errors import InputError, option_named, shown_text
from edgetwin.links import LINK_CHECK_FILE, link_warnings, read_link_checks
from edgetwin.number_text import exact_text, figure_text
from edgetwin.profile import POWER_STATES, DeviceProfile
from edgetwin.resolved_scenario import RESOLVED_FILE, load_resolved
from edgetwin.results import STATUS_OK, read_status
from edgetwin.scenario import Scenario
from edgetwin.schema import Strict, dump_yaml, load_yaml_model
from edgetwin.sweep_points import Configuration
from edgetwin.table_files import RESULTS_CSV

RUN_FILES = (RESULTS_CSV, LINK_CHECK_FILE, RESOLVED_FILE)
EFFICIENCY = "network.bandwidth_efficiency"  # measured by the link checks, not fitted
_LOG = logging.getLogger(__name__)

# The table fit's timing parameters (less those fixed below or measured), and two more.
EMU_PARAMETERS: tuple[Parameter, ...] = (
    *TIMING_PARAMETERS,
    ("compute.rows_half_util", 0.0, 1e4, 10.0),
    ("network.duplex_efficiency", 0.2, 1.0, 0.9),
)
# Other load on the machine slows a run and never speeds it up: a measurement slower than
# the twin's prediction weighs 0.1, a faster one 0.9 (the fit follows undisturbed runs).
LOAD_EXPECTILE = 0.1
CPU_FIXED: dict[str, float] = {
    "compute.sync_host_ms": 0.0,
    "compute.sync_host_ms_per_mb": 0.0,
    "staging.size_exponent": 1.0,
    **{f"power.{state}_w": 0.0 for state in POWER_STATES},
}


class EmuCalibrationSpec(Strict):
    """A ``kind: emu`` calibration job: facts, the emulator run folder, fixed values."""

    kind: Literal["emu"]
    profile: ProfileFacts
    run: str  # an `edgetwin run --mode emu` output folder, relative to the spec
    fixed: dict[str, float] = Field(default_factory=dict)


def calibrate_from_emu(spec_path: Path, command: str) -> DeviceProfile:
    """The profile an emu spec describes, with its residuals and the inputs' SHA-256."""
    spec = load_yaml_model(spec_path, EmuCalibrationSpec)
    check_fixed(spec_path, spec.fixed, FIXABLE_SECTIONS)
    run = _run_folder(spec_path.parent / spec.run, spec_path, "run")
    return _fit_run(spec, spec_path, run, command)


def _fit_run(spec: EmuCalibrationSpec, spec_path: Path, run: Path, command: str) -> DeviceProfile:
    """The profile ``spec`` describes, fitted from the emulator run folder ``run``
    (``spec_path``: the spec an error names)."""
    scenario = load_resolved(run / RESOLVED_FILE)
    measured = read_emu_rows(run / RESULTS_CSV)
    efficiency = spec.fixed.get("network.bandwidth_efficiency")
    if efficiency is None:
        efficiency = _link_efficiency(run, scenario)
    fixed = CPU_FIXED | {"network.bandwidth_efficiency": efficiency} | spec.fixed
    fastest = fastest_per_configuration(measured)
    try:
        profile = fit_measured(
            spec.profile,
            scenario,
            fastest,
            EMU_PARAMETERS,
            fixed,
            expectile=LOAD_EXPECTILE,
            spec_path=spec_path,
        )
    except TooFewPoints as error:
        raise too_few_points_error(run / RESULTS_CSV, error) from None
    report = residual_report(scenario, profile, fastest, run / RESULTS_CSV)
    fit = {
        "method": f"scipy.optimize.least_squares, {LOAD_EXPECTILE}-expectile of the log "
        "errors of the twin's compute, staging, comm and total (total weighted 2) against "
        "each configuration's fastest repetition in an emulator run; bandwidth_efficiency = "
        "median iperf3 goodput / set rate (its share: the rate / flows) of link_check.csv",
        "sources": [source_record(run / name) for name in RUN_FILES],
        "command": command,
        "rows": {"mode": "emu", "count": len(measured)},
        "fixed": fixed,
        **at_bound_block(at_bound(profile)),
        **not_pinned_block(not_pinned(profile)),
        **report,
    }
    return profile.model_copy(update={"fit": fit})


def _run_folder(run: Path, named_by: Path, field: str) -> Path:
    """``run`` resolved, if it is an emulator run's output folder (it holds ``RUN_FILES``);
    else an InputError naming ``named_by`` and ``field``."""
    try:
        resolved = run.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise InputError(named_by, field, f"cannot resolve {shown_text(str(run))}: {exc}") from None
    if not resolved.is_dir():
        problem = f"{shown_text(str(run))} is not a folder (an 'edgetwin run --mode emu' output)"
        raise InputError(named_by, field, problem)
    for name in RUN_FILES:
        if not (resolved / name).is_file():
            problem = f"no {name} in {shown_text(str(run))}: not an emulator run's folder"
            raise InputError(named_by, field, problem)
    return resolved


def calibrate_machine_from_emu(
    run_dir: Path, out_dir: Path, command: str, published_as: Path | None = None
) -> DeviceProfile:
    """``out_dir/spec.yaml`` (this machine's facts, the run) and the profile fitted from it.

    ``published_as``: the folder ``out_dir`` becomes (a command writes into a staging
    folder, then renames it to its ``--out``), which the spec's ``run`` is relative to;
    relative to the staging folder, it pointed one level too deep."""
    spec_path = out_dir / "spec.yaml"
    run = _run_folder(run_dir, run_dir, option_named("--emu", "emu="))
    final = (out_dir if published_as is None else published_as).resolve()
    raw = machine_emu_spec(Path(os.path.relpath(run, final)))
    write_text_atomic(spec_path, dump_yaml(raw))
    profile = _fit_run(EmuCalibrationSpec.model_validate(raw), spec_path, run, command)
    write_profile(profile, out_dir / "profile.yaml")
    return profile


def machine_emu_spec(run: Path) -> dict[str, Any]:
    """An emu spec for this machine and the emulator run at ``run`` (relative to the spec)."""
    host = os.uname()
    return {
        "kind": "emu",
        "profile": {
            "name": f"machine_emu_{host.nodename}",
            "description": f"{host.machine} host, {os.cpu_count()} cores; every emulated device "
            "runs on its CPU cores; GLOO over htb-shaped Mininet links; no power meter "
            "(powers are 0)",
            "ram_mb": host_ram_mb(),
        },
        "run": str(run),
    }


def read_emu_rows(path: Path) -> list[MeasuredRow]:
    """The rows of an emulator run; a row of another mode or a failed one is an error, and
    so is one without its total (``fastest_per_configuration`` picks a repetition by it)."""
    for row in read_rows(path, ("total_ms",)):
        mode = row.cells.get("mode")
        if mode != "emu":
            problem = f"line {row.line}: mode {mode!r}; an emu fit reads emulator rows only"
            raise InputError(path, "mode", problem)
        status = read_status(row.cells.get("status"))
        if status != STATUS_OK:
            raise row.error("status", f"a failed run: {status}")
        if row.optional_text("total_ms") is None:
            why = "empty cell: a configuration is fitted from its repetition of least total_ms"
            raise row.error("total_ms", why)
    return read_measured(path)


def fastest_per_configuration(rows: list[MeasuredRow]) -> list[MeasuredRow]:
    """One row per configuration: its repetition with the least total time (other load on
    the machine slows repetitions and never speeds them up: the fastest is the least
    disturbed)."""
    fastest: dict[Configuration, MeasuredRow] = {}
    for row in rows:
        best = fastest.get(row.config)
        if best is None or row.values["total_ms"] < best.values["total_ms"]:
            fastest[row.config] = row
    return list(fastest.values())


def _link_efficiency(run: Path, scenario: Scenario) -> float:
    """``goodput_share`` of the run's link checks; a run that skipped them is an error."""
    path = run / LINK_CHECK_FILE
    if scenario.emulator.link_check_s == 0:
        raise InputError(
            path,
            None,
            "no link checks: the run set emulator.link_check_s to 0, and the fit takes "
            "network.bandwidth_efficiency from them (run it with link checks, or fix "
            "network.bandwidth_efficiency in the spec)",
        )
    return goodput_share(path)


def goodput_share(path: Path) -> float:
    """``network.bandwidth_efficiency``: the median of iperf3's TCP goodput over the set
    rate's share (the rate / ``flows``, the senders at once on a shared medium), every
    bandwidth and direction. A bad cell names the file, its column and the line, and so
    does a goodput whose share is not one a profile takes (above 2: not the link's); a link
    short of its rate (it lowers the share) is a warning."""
    checks = read_link_checks(path)
    if not checks:
        raise InputError(path, None, "no link checks (the header alone)")
    for check in checks:
        senders = "" if check.flows == 1 else f", one of {check.flows} senders at once"
        carried = (
            f"line {check.line}: a goodput of {figure_text(check.goodput_mbps)} Mbps over a link "
            "set "
            f"to {exact_text(check.bandwidth_mbps)} Mbps{senders}"
        )
        check_measured(path, "goodput_mbps", EFFICIENCY, check.goodput_share, carried)
    for warning in link_warnings(checks):
        _LOG.warning("warning: %s; %s is fitted from it", warning, EFFICIENCY)
    share = round(median(check.goodput_share for check in checks), 4)
    if share <= 0:
        raise InputError(path, "goodput_mbps", "the links carried nothing (median 0)")
    return share
