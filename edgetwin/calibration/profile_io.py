"""Writing device profiles (YAML), atomically and in a stable key order; input provenance;
the facts a calibration spec gives about its device."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import BaseModel, ValidationError

from edgetwin.atomic import write_texts_together
from edgetwin.errors import FORCE_OPTION, OUT_OPTION, InputError, shown
from edgetwin.file_kinds import kind_of_file
from edgetwin.output_folder import blocking_file, output_kind, why_not_written
from edgetwin.phone_profile import PhoneProfile
from edgetwin.profile import (
    MB,
    ComputeParams,
    DeviceProfile,
    MemoryParams,
    NetworkParams,
    PowerParams,
    StagingParams,
)
from edgetwin.provenance import files_read, sha256_file
from edgetwin.schema import PositiveFloat, Strict, dump_yaml, single_value_words

# the profile sections a spec's ``fixed`` may set, as ``section.parameter: value``
FIXABLE_SECTIONS: dict[str, type[BaseModel]] = {
    "compute": ComputeParams,
    "staging": StagingParams,
    "network": NetworkParams,
    "power": PowerParams,
}


def parameter_section(
    path: Path, field: str, key: str, sections: Mapping[str, type[BaseModel]]
) -> type[BaseModel]:
    """The section model that ``key`` (``section.parameter``) names a parameter of; else an
    InputError naming ``field``."""
    section, _, name = key.partition(".")
    params = sections.get(section)
    if params is None:
        known = ", ".join(sections)
        problem = (
            f"{shown(key)} is not a parameter: give section.parameter, the section one of {known}"
        )
        raise InputError(path, field, problem)
    if name not in params.model_fields:
        names = sorted(params.model_fields)
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean {section}.{close[0]}?" if close else f"it has {', '.join(names)}"
        raise InputError(path, field, f"{shown(key)} is not a parameter of {section} ({hint})")
    return params


def check_fixed(
    path: Path, fixed: Mapping[str, float], sections: Mapping[str, type[BaseModel]]
) -> None:
    """An InputError naming ``fixed.<key>`` unless each key is a parameter of one of
    ``sections`` and its value one that parameter takes."""
    for key, value in fixed.items():
        params = parameter_section(path, f"fixed.{key}", key, sections)
        problem = out_of_range(params, key.partition(".")[2], value)
        if problem is not None:
            raise InputError(path, f"fixed.{key}", problem)


def check_measured(path: Path, field: str, key: str, value: float, measured: str) -> None:
    """An InputError naming ``path`` and ``field`` unless ``value``, which ``measured`` (what
    the file shows, e.g. ``line 2: ...``) gives the profile parameter ``key``
    (``section.parameter``) as, is one that parameter takes: a value taken from the data
    is checked where it is read, as a spec's ``fixed`` is, not by the profile built from
    it (a pydantic traceback naming neither the file nor the line)."""
    section, _, name = key.partition(".")
    problem = out_of_range(FIXABLE_SECTIONS[section], name, value)
    if problem is not None:
        problem = f"{measured} gives {key} a value a profile does not take: {problem}"
        raise InputError(path, field, problem)


def out_of_range(params: type[BaseModel], name: str, value: float) -> str | None:
    """Why ``params`` does not take ``value`` as its parameter ``name``, the value said
    (the schema's words: ``should be greater than 0, not -5``), or None when it does."""
    try:
        params.__pydantic_validator__.validate_assignment(params.model_construct(), name, value)
    except ValidationError as exc:
        error = exc.errors()[0]
        return single_value_words(error) or f"{error['msg']} (got {shown(value)})"
    return None


class ProfileFacts(Strict):
    """What a calibration spec knows about the device without fitting (checked as the
    profile checks them, so a bad value names the spec's field)."""

    name: str
    description: str = ""
    ram_mb: PositiveFloat
    battery_wh: PositiveFloat | None = None
    memory: MemoryParams | None = None  # a vendor's figure, copied into the profile


def write_profile(profile: DeviceProfile | PhoneProfile, path: Path, force: bool = False) -> None:
    """Write ``profile`` to ``path`` with a header naming the command that made it; a path
    that cannot be written (a folder, below a file, read-only), or a profile already there
    without ``force``, is an InputError naming it."""
    write_profiles({path: profile}, force)


def write_profiles(
    profiles: Mapping[Path, DeviceProfile | PhoneProfile], force: bool = False
) -> None:
    """``write_profile`` for several files at once, all or none (``write_texts_together``):
    a fit that makes several profiles never leaves some new and some old. A path the
    command read (within ``recording_reads``: its spec, a trace, the measured table) is
    refused, not overwritten, and so is a profile already there unless ``force``."""
    read = files_read()
    for path in profiles:
        check_profile_out(path, read, force)
    texts = {path: _profile_text(profile) for path, profile in profiles.items()}
    try:
        write_texts_together(texts)
    except OSError as exc:
        first = next(iter(profiles))  # one file, or the folder that all of them go to
        where = first if len(profiles) == 1 else first.parent
        problem = f"cannot write: {why_not_written(first, exc)}"
        raise InputError(where, OUT_OPTION, problem) from None


def check_profile_out(path: Path, read: Iterable[str | Path], force: bool = False) -> None:
    """An InputError naming ``path`` (``--out``) where a profile may not be written: a
    file of ``read`` (the command's spec, a trace, the measured table), a folder, a file
    that holds something else (a results table, notes), or, unless ``force``, a file that
    is there already (``init`` refuses one the same way): it would be lost. Checked before
    a fit too (with the spec as ``read``), so that the refusal does not wait for it."""
    found = output_kind(path)  # first: a name with a NUL byte cannot even be resolved
    if path.resolve() in {Path(p).resolve() for p in read}:
        raise InputError(path, OUT_OPTION, "a file this command read; write the profile elsewhere")
    blocked = blocking_file(path)
    if blocked is not None:
        raise InputError(path, OUT_OPTION, f"cannot write: {blocked} is a file, not a folder")
    if found == "folder":
        raise InputError(path, OUT_OPTION, "a folder, not a profile file")
    if _holds_something_else(path):
        problem = "exists and is not a profile; write the profile elsewhere"
        raise InputError(path, OUT_OPTION, problem)
    if not force and found == "file":
        raise InputError(path, OUT_OPTION, f"exists; pass {FORCE_OPTION} to replace it")


def _holds_something_else(path: Path) -> bool:
    """Whether ``path`` is a non-empty regular file that is not a profile (a profile is
    replaced, with ``force``: that is how a shipped one is made again; what is not a
    regular file, the write says it cannot write)."""
    if output_kind(path) != "file" or path.stat().st_size == 0:
        return False
    return kind_of_file(path) != "profile"


def _profile_text(profile: DeviceProfile | PhoneProfile) -> str:
    command = profile.fit.get("command", "edgetwin calibrate")
    header = f"# Generated by `{command}`; do not edit by hand.\n"
    return header + dump_yaml(profile.model_dump(mode="json"), width=100)


def source_record(path: Path) -> dict[str, str]:
    """Provenance of one input file: its name and SHA-256."""
    return {"file": path.name, "sha256": sha256_file(path)}


def host_ram_mb() -> float:
    """This machine's physical memory in MB (10^6 bytes, the ``MB`` the twin divides bytes
    by): the ``ram_mb`` of a profile of it."""
    return round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / MB)
