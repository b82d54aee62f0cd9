"""What a ``kind: traces`` calibration spec asks for, and the traces it reads.

The spec names the folder, the model the traces ran, the link's token bucket, which
profile sections to fit, fixed values for what the traces do not show, and a base profile
for the sections not fitted. Files are found by name: ``vit_latency.csv`` (compute),
``gloo_staged_allgather.csv`` or ``gloo_staged_allgather_bw.csv`` (staging and network),
``power_samples.csv`` or a jtop log (power), ``decoder_latency.csv`` (memory: the
bandwidth, from real decoder generations, ``fit_decoder``).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from edgetwin.calibration.profile_io import (
    FIXABLE_SECTIONS,
    ProfileFacts,
    check_fixed,
    parameter_section,
)
from edgetwin.calibration.readers.decoder_latency import (
    DECODER_LATENCY_FILE,
    DecoderLatency,
    read_decoder_latency,
)
from edgetwin.calibration.readers.folder import power_logs
from edgetwin.calibration.readers.gpu_bench import (
    STAGING_COPY_FILE,
    VIT_FULL,
    VIT_LATENCY_FILE,
    StagingCopy,
    VitLatency,
    read_staging_copy,
    read_vit_latency,
)
from edgetwin.calibration.readers.power import NVML_POWER_FILE, PowerSample, read_nvml_power
from edgetwin.calibration.readers.staged_exchange import (
    BANDWIDTH_FILE,
    LOOPBACK_FILE,
    StagedExchange,
    read_staged_allgather,
    read_staged_allgather_bw,
)
from edgetwin.calibration.trace_groups import compute_label
from edgetwin.decoder_spec import DecoderSpec, positions_problem
from edgetwin.errors import InputError, shown
from edgetwin.model_spec import ModelSpec
from edgetwin.number_text import counted
from edgetwin.profile import DeviceProfile, load_profile, profile_path
from edgetwin.schema import Seed, Strict, load_yaml_model

Section = Literal["compute", "staging", "network", "power", "memory"]
PROFILE_SECTIONS = ("compute", "staging", "network", "power", "memory")


class TraceCalibrationSpec(Strict):
    """A ``kind: traces`` calibration job."""

    kind: Literal["traces"]
    profile: ProfileFacts
    traces: str
    base: str | None = None
    model: ModelSpec = ModelSpec()
    decoder: DecoderSpec | None = None  # what decoder_latency.csv ran (its rows: layers)
    burst_kb: float | None = Field(default=None, gt=0)
    fit: tuple[Section, ...] = ("compute", "staging", "network", "power")
    fixed: dict[str, float] = Field(default_factory=dict)
    # parameters the traces cannot identify, taken from the base profile (not fitted)
    from_base: tuple[str, ...] = ()
    bootstrap: int = Field(default=30, ge=0, le=1000)
    seed: Seed = 0


def load_trace_spec(path: Path) -> TraceCalibrationSpec:
    spec = load_yaml_model(path, TraceCalibrationSpec)
    check_fixed(path, spec.fixed, FIXABLE_SECTIONS)
    for k, key in enumerate(spec.from_base):
        parameter_section(path, f"from_base.{k}", key, FIXABLE_SECTIONS)
        if key in spec.fixed:
            problem = f"{key!r} is also in fixed: give it one source"
            raise InputError(path, f"from_base.{k}", problem)
    if spec.from_base and spec.base is None:
        raise InputError(path, "from_base", "needs a base profile to take them from (base:)")
    return spec


def not_fitted_values(spec: TraceCalibrationSpec, base: DeviceProfile | None) -> dict[str, float]:
    """Every parameter not fitted, as ``section.parameter``: the base's for ``from_base``,
    then ``fixed``."""
    if base is None:  # load_trace_spec refuses from_base without a base
        return dict(spec.fixed)
    taken = {key: _value_in(base, key) for key in spec.from_base}  # _base: none is None
    return {**{k: v for k, v in taken.items() if v is not None}, **spec.fixed}


def _value_in(profile: DeviceProfile, key: str) -> float | None:
    """A profile's value of ``section.parameter``."""
    section, _, name = key.partition(".")
    value: float | None = getattr(getattr(profile, section), name)
    return value


def base_profile_file(spec_path: Path) -> Path | None:
    """The profile file a ``kind: traces`` spec's ``base`` names (None without one, or
    where it names none that exists: the fit says so), for the checks made before the fit."""
    spec = load_trace_spec(spec_path)
    if spec.base is None:
        return None
    try:
        return profile_path(spec.base, spec_path.parent)
    except InputError:
        return None


def _base(spec: TraceCalibrationSpec, spec_path: Path) -> DeviceProfile | None:
    """The base profile; each ``from_base`` parameter must have a value there."""
    if spec.base is None:
        return None
    try:
        base = load_profile(spec.base, spec_path.parent)
    except InputError as exc:
        if exc.path is not None:  # the base file itself is bad: that file is named
            raise
        raise InputError(spec_path, "base", exc.problem) from None
    for k, key in enumerate(spec.from_base):
        if _value_in(base, key) is None:
            problem = f"the base profile {spec.base!r} has no value for {key!r}"
            raise InputError(spec_path, f"from_base.{k}", problem)
    return base


class TraceData:
    """What a trace folder holds, read by the readers (empty lists when absent)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files: list[Path] = []
        self.latencies: list[VitLatency] = self._read(VIT_LATENCY_FILE, read_vit_latency)
        loopback = self._read(LOOPBACK_FILE, read_staged_allgather)
        shaped = self._read(BANDWIDTH_FILE, read_staged_allgather_bw)
        self.exchanges: list[StagedExchange] = _rank_zero(folder / LOOPBACK_FILE, loopback)
        self.exchanges += shaped
        self.power_file, self.power_log, self.power = self._read_power()
        self.copies: list[StagingCopy] = self._read(STAGING_COPY_FILE, read_staging_copy)
        self.decoder: list[DecoderLatency] = self._read(DECODER_LATENCY_FILE, read_decoder_latency)

    def _read_power(self) -> tuple[Path | None, str, list[PowerSample]]:
        """The folder's one power log (NVML ``power_samples.csv`` or a jtop log): its path,
        its kind and its samples."""
        logs = power_logs(self.folder)
        if len(logs) > 1:
            names = ", ".join(path.name for path, _ in logs)
            problem = f"{len(logs)} power logs ({names}): a folder holds one device's, in one"
            raise InputError(self.folder, "power", problem)
        if not logs:
            return None, "", []
        path, reader = logs[0]
        self.files.append(path)
        return path, "NVML" if reader is read_nvml_power else "jtop", reader(path)

    def _read(self, name: str, reader: Any) -> list[Any]:
        """The records of the trace file ``name`` (none when the folder has no such file);
        something else of that name (a folder) is an InputError: it was taken for no file,
        and a section fitted from it said the folder "holds no" such file."""
        path = self.folder / name
        if not path.is_file():
            if path.exists() or path.is_symlink():
                kind = "a folder" if path.is_dir() else "not a regular file"
                raise InputError(path, None, f"{kind}, not a trace file: {name} is read as one")
            return []
        self.files.append(path)
        records: list[Any] = reader(path)
        return records


def _rank_zero(path: Path, records: list[StagedExchange]) -> list[StagedExchange]:
    """The loopback exchange records of rank 0, whose timings the staging and network fits
    read; rows, but none of rank 0, are an InputError naming ``path`` and its ``rank``
    column (it was "nothing sets staging.fixed_ms", naming the spec's ``fit``)."""
    kept = [record for record in records if record.rank == 0]
    if records and not kept:
        ranks = ", ".join(str(rank) for rank in sorted({record.rank for record in records}))
        problem = (
            f"{len(records)} rows, none of rank 0 (ranks: {ranks}): the staging and network "
            "fits read rank 0's timings"
        )
        raise InputError(path, "rank", problem)
    return kept


def _trace_data(spec: TraceCalibrationSpec, spec_path: Path) -> TraceData:
    """The traces folder the spec names, read; one without any trace file is bad input."""
    folder = (spec_path.parent / spec.traces).resolve()
    if not folder.is_dir():
        raise InputError(spec_path, "traces", f"no trace folder at {shown(str(folder))}")
    data = TraceData(folder)
    if not data.files:
        names = ", ".join(TRACE_FILES)
        problem = f"no trace file in {shown(str(folder))}: it reads {names} or a jtop log"
        raise InputError(spec_path, "traces", problem + _near_miss(data, TRACE_FILES))
    return data


def _near_miss(data: TraceData, names: tuple[str, ...]) -> str:
    """``; vit_latency_jetson.csv is not read: ...`` for the first file of the folder not
    read whose name is close to one of ``names`` (files are found by exact name); empty
    where none is."""
    read = {path.name for path in data.files}
    for file in sorted(data.folder.iterdir()):
        close = difflib.get_close_matches(file.name.lower(), names, n=1, cutoff=0.6)
        if close and file.name not in read and file.is_file():
            return (
                f"; {file.name} is not read: trace files are found by name (rename it {close[0]})"
            )
    return ""


def _check_decoder(spec: TraceCalibrationSpec, spec_path: Path, data: TraceData) -> None:
    if "memory" in spec.fit and data.decoder and spec.decoder is None:
        problem = f"{DECODER_LATENCY_FILE} needs the decoder it ran (e.g. {{preset: gpt2_small}})"
        raise InputError(spec_path, "decoder", problem)
    if spec.decoder is None:
        return
    for row in data.decoder:  # a generation the decoder cannot run was not measured on it
        problem = positions_problem(spec.decoder, row.prompt_tokens, row.output_tokens)
        if problem:
            why = f"{problem} (the spec's decoder is not the one measured?)"
            raise InputError(data.folder / DECODER_LATENCY_FILE, "prompt_tokens", why)


def _check_model(spec: TraceCalibrationSpec, data: TraceData) -> None:
    """A whole-model forward (``vit_full``) runs the spec's model over its tokens: other
    tokens were timed on another model (the fit took this one's embedding and the other's
    blocks, and wrote a profile without a word)."""
    for row in data.latencies:
        if row.kernel == VIT_FULL and row.tokens != spec.model.tokens:
            label = compute_label((row.kernel, row.batch, row.tokens))
            problem = (
                f"{label}, where a whole forward of the spec's model runs "
                f"{counted(spec.model.tokens, 'token')}: the spec's model is not the one measured"
            )
            raise InputError(data.folder / VIT_LATENCY_FILE, "tokens", problem)


# the files a trace folder is read from, found by name (a jtop log: by its header)
TRACE_FILES = (
    VIT_LATENCY_FILE,
    LOOPBACK_FILE,
    BANDWIDTH_FILE,
    NVML_POWER_FILE,
    STAGING_COPY_FILE,
    DECODER_LATENCY_FILE,
)
# the trace files each section is fitted from (any one of them)
SECTION_FILES: dict[Section, tuple[str, ...]] = {
    "compute": (VIT_LATENCY_FILE,),
    "staging": (LOOPBACK_FILE, BANDWIDTH_FILE),
    "network": (LOOPBACK_FILE, BANDWIDTH_FILE),
    "power": (NVML_POWER_FILE, "jtop log"),
    "memory": (DECODER_LATENCY_FILE,),
}
# ... and those of every fit, the reported plain copies' included
FIT_FILES: dict[str, tuple[str, ...]] = {
    **dict(SECTION_FILES.items()),  # keys widened to str (a dict is invariant in them)
    "copy_pinned": (STAGING_COPY_FILE,),
    "copy_pageable": (STAGING_COPY_FILE,),
}


def check_requested_data(spec: TraceCalibrationSpec, spec_path: Path, data: TraceData) -> None:
    """A section a spec's own ``fit`` lists must have records to fit: without them it was
    taken from the base (or left out) without a word. The default list fits what is there."""
    if "fit" not in spec.model_fields_set:
        return
    held = {path.name for path in data.files}
    for i, section in enumerate(spec.fit):
        files = SECTION_FILES[section]
        found = data.power_file is not None if section == "power" else bool(held & set(files))
        if not found:
            problem = f"asks for {section}, but {data.folder} holds no {' or '.join(files)}"
            raise InputError(spec_path, f"fit.{i}", problem + _near_miss(data, files))


@dataclass(frozen=True)
class TraceInputs:
    """A spec, its traces and its base profile (None without one), read and checked."""

    spec: TraceCalibrationSpec
    data: TraceData
    base: DeviceProfile | None


def read_inputs(spec_path: Path) -> TraceInputs:
    """The spec at ``spec_path``, the traces it names and its base profile; what a fit and
    a held-out refit read alike."""
    spec = load_trace_spec(spec_path)
    data = _trace_data(spec, spec_path)
    _check_decoder(spec, spec_path, data)
    _check_model(spec, data)
    return TraceInputs(spec, data, _base(spec, spec_path))
