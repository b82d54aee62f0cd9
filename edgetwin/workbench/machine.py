"""Profiling the machine this runs on (``edgetwin calibrate-machine`` is a thin layer over
``calibrate_machine``): the real code paths timed, their traces, a spec and the profile
fitted to them, in one output folder; or the profile fitted to an emulator run's folder.
torch and the fitting code are imported when it runs, not with the API."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from edgetwin.errors import InputError, option_named
from edgetwin.profile import DeviceProfile
from edgetwin.progress import Progress, Steps, no_progress
from edgetwin.provenance import recording_reads, write_provenance
from edgetwin.this_machine import available_cores, load_average_1min
from edgetwin.workbench.arguments import (
    flag_argument,
    out_argument,
    path_argument,
    progress_argument,
    recorded_command,
)
from edgetwin.workbench.calibrating import warn_of_the_fit
from edgetwin.workbench.output import output_folder


def calibrate_machine(
    out: str | Path,
    *,
    quick: bool = False,
    decoder: bool = True,
    emu: str | Path | None = None,
    force: bool = False,
    progress: Progress | None = no_progress,
    command: Sequence[str] | None = None,
) -> DeviceProfile:
    """Profile this machine into the folder ``out``: ``traces/``, ``spec.yaml``,
    ``profile.yaml`` and ``provenance.json``, all or nothing (a non-empty ``out`` only with
    ``force``); return the profile.

    ``quick``: a small model, a few seconds; ``decoder=False``: no decoder generations (no
    memory bandwidth in the profile). ``emu``: fit an ``edgetwin run --mode emu`` folder
    instead of measuring (then ``out`` gets ``spec.yaml`` and ``profile.yaml``).
    ``progress`` counts the measurements and the fit; ``command`` as for ``run``. The fit's
    warnings are ``calibrate``'s (``fit_check.FIT_WARNINGS``): a ``PoorFitWarning`` (on a
    busy machine naming its load as the cause), an ``AtBoundWarning`` per parameter a bound
    stopped, a ``NotPinnedWarning`` per parameter no row changes with (``emu``), a
    ``SkippedRefitWarning`` per section a held-out refit could not refit, and a
    ``NoHeldOutWarning`` when that leaves a fitted metric no held-out errors.
    """
    out_dir = out_argument(out)
    if out_dir is None:
        raise InputError(None, "out", "the folder to write the profile into: give one")
    flags = {"quick": flag_argument(quick, "quick"), "decoder": flag_argument(decoder, "decoder")}
    emu_dir = None if emu is None else path_argument(emu, "emu")
    shows = progress_argument(progress)
    given = [f"{name}={value}" for name, value in flags.items() if value != (name == "decoder")]
    call = recorded_command(
        command,
        "edgetwin.calibrate_machine",
        str(out_dir),
        *given,
        *([] if emu_dir is None else [f"emu={emu_dir}"]),
    )
    return profile_machine(
        out_dir,
        quick=flags["quick"],
        decoder=flags["decoder"],
        emu=emu_dir,
        force=flag_argument(force, "force"),
        steps=shows,
        command=call,
    )


def profile_machine(
    out: Path,
    *,
    quick: bool,
    decoder: bool,
    emu: Path | None,
    force: bool,
    steps: Steps,
    command: list[str],
) -> DeviceProfile:
    """``calibrate_machine`` on checked arguments, its steps named (the command shows them)."""
    if emu is not None:
        return _fit_emu_run(out, emu, quick, decoder, force, command)
    from edgetwin.calibration.fit_check import busy_machine_cause
    from edgetwin.calibration.machine import FULL, QUICK, calibration_steps, measure_and_fit

    fit_command = " ".join(
        [
            f"edgetwin calibrate-machine --out {out}",
            *(["--quick"] if quick else []),
            *([] if decoder else ["--no-decoder"]),
        ]
    )
    plan = QUICK if quick else FULL
    if not decoder:
        plan = replace(plan, decoder=None)
    load_average, cores = load_average_1min(), available_cores()  # before it adds its own
    with (
        output_folder(out, force) as staging,
        steps("calibrate-machine", calibration_steps(plan)) as advance,
    ):
        profile = measure_and_fit(staging, plan, fit_command, advance)
        write_provenance(staging, command=command, seed=None, inputs={})
    warn_of_the_fit(profile, busy_machine_cause(load_average, cores), stacklevel=4)
    return profile


def _fit_emu_run(
    out: Path, emu: Path, quick: bool, decoder: bool, force: bool, command: list[str]
) -> DeviceProfile:
    """The profile fitted to the emulator run ``emu``; ``quick`` and ``decoder=False``
    choose what this machine measures, and an emulator run measures nothing here (it timed
    no decoder), so they are refused rather than ignored."""
    from edgetwin.calibration.fit_emu import calibrate_machine_from_emu

    for option, argument, given in (
        ("--quick", "quick=True", quick),
        ("--no-decoder", "decoder=False", not decoder),
    ):
        if given:
            raise InputError(
                emu,
                option_named(option, argument),
                f"{option} chooses what this machine measures; --emu measures nothing "
                "(it fits the emulator run's rows): leave one of them out",
            )
    fit_command = f"edgetwin calibrate-machine --emu {emu} --out {out}"
    # the run folder it fits is read in the folder, after out is checked: named here
    with recording_reads() as reads, output_folder(out, force, inputs=(str(emu),)) as staging:
        profile = calibrate_machine_from_emu(emu, staging, fit_command, published_as=out)
        write_provenance(staging, command=command, seed=None, inputs=reads)
    warn_of_the_fit(profile, stacklevel=5)
    return profile
