"""Fitting profiles from a calibration spec (``edgetwin calibrate`` is a thin layer over
``calibrate``): a measured table, traces or an emulator run give one device profile, an
Android spec one phone profile per class. The fitting code (and SciPy) is imported when
a fit runs, not with the API."""

from __future__ import annotations

import warnings
from pathlib import Path

from edgetwin.errors import InputError, shown
from edgetwin.file_kinds import CALIBRATION_KINDS, check_kind
from edgetwin.phone_profile import PhoneProfile
from edgetwin.profile import DeviceProfile
from edgetwin.progress import Progress, Steps, no_progress
from edgetwin.provenance import recording_reads
from edgetwin.schema import read_yaml_mapping
from edgetwin.workbench.arguments import (
    flag_argument,
    out_argument,
    path_argument,
    progress_argument,
)


def calibrate(
    spec: str | Path,
    *,
    out: str | Path | None = None,
    force: bool = False,
    command: str | None = None,
    progress: Progress | None = no_progress,
) -> DeviceProfile | list[PhoneProfile]:
    """Fit what ``spec`` describes: a ``DeviceProfile`` (a measured table, ``kind: traces``
    or ``kind: emu``) or, for an Android spec, a ``PhoneProfile`` per phone class.

    With ``out``, write it as ``edgetwin calibrate --out`` does (a profile file; a folder
    of ``<class>.yaml`` for an Android spec), all or nothing, never onto a file the fit
    read; a profile already there is refused unless ``force``. ``command`` is what the
    profile's header and ``fit.command`` record (the CLI passes its command line; ``None``
    records this call). A profile that misses its own measurements by more than half is
    returned with a ``PoorFitWarning`` (and the other warnings of ``warn_of_the_fit``). ``progress``
    (``edgetwin.progress``) counts a trace or table fit's fits and held-out refits, the
    seconds-long part (an emulator run's or an Android spec's fit takes about a second).
    """
    spec_path = path_argument(spec, "spec")
    out_path = out_argument(out)
    force = flag_argument(force, "force")
    shows = progress_argument(progress)
    if command is None:
        written = None if out_path is None else str(out_path)
        command = f"edgetwin.calibrate({str(spec_path)!r}, out={written!r})"
    elif not isinstance(command, str):
        raise InputError(None, "command", f"a string, not {shown(command)}")
    kind = spec_kind(spec_path)
    if out_path is not None and kind != "android":
        from edgetwin.calibration.profile_io import check_profile_out
        from edgetwin.calibration.trace_inputs import base_profile_file

        read = [spec_path]  # and the profile a trace fit starts from, which it reads
        base = base_profile_file(spec_path) if kind == "traces" else None
        # before the fit
        check_profile_out(out_path, read if base is None else [*read, base], force)
    with recording_reads():  # write_profiles refuses to overwrite what the fit read
        fitted = _fit_and_write(spec_path, kind, out_path, force, command, shows)
    if isinstance(fitted, DeviceProfile):
        warn_of_the_fit(fitted)
    return fitted


def warn_of_the_fit(profile: DeviceProfile, cause: str | None = None, stacklevel: int = 3) -> None:
    """Warn each of ``fit_check.fit_warnings`` (``cause``: why a poor fit's measurements
    disagree, when known) with its category, as ``edgetwin calibrate`` prints them;
    ``stacklevel`` points them at the API's caller."""
    from edgetwin.calibration.fit_check import fit_warnings

    for category, line in fit_warnings(profile, cause):
        warnings.warn(line, category, stacklevel=stacklevel)


def _fit_and_write(
    spec: Path, kind: str, out: Path | None, force: bool, command: str, progress: Steps
) -> DeviceProfile | list[PhoneProfile]:
    from edgetwin.calibration.fit_android import fit_android_profiles, write_android_profiles
    from edgetwin.calibration.fit_emu import calibrate_from_emu
    from edgetwin.calibration.fit_reference import fit_profile
    from edgetwin.calibration.profile_io import write_profile
    from edgetwin.calibration.trace_profile import calibrate_from_traces

    if kind == "android":
        phones = fit_android_profiles(spec, command)
        if out is not None:
            write_android_profiles(phones, out, force)
        return phones
    if kind == "traces":
        profile = calibrate_from_traces(spec, command, progress)
    elif kind == "emu":
        profile = calibrate_from_emu(spec, command)
    else:
        profile = fit_profile(spec, command, progress)
    if out is not None:
        write_profile(profile, out, force)
    return profile


def spec_kind(spec: Path) -> str:
    """``android``, or the spec's ``kind`` (``table`` when it has none)."""
    from edgetwin.calibration.android_inputs import is_android_spec

    check_kind(spec, "calibration")
    if is_android_spec(spec):
        return "android"
    kind = read_yaml_mapping(spec).get("kind", "table")
    if kind not in CALIBRATION_KINDS:
        problem = f"unknown calibration kind {shown(kind)}: {', '.join(CALIBRATION_KINDS)}"
        raise InputError(spec, "kind", problem)
    return str(kind)
