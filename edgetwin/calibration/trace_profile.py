"""A device profile from a folder of hardware traces (``kind: traces`` specs).

The spec names the folder, the model the traces ran, the link's token
bucket, which profile sections to fit, fixed values for what the traces do
not show, and a base profile for the sections not fitted. Files are found
by name: ``vit_latency.csv`` (compute), ``gloo_staged_allgather.csv`` or
``gloo_staged_allgather_bw.csv`` (staging and network),
``power_samples.csv`` or a jtop log (power), ``decoder_latency.csv`` (memory: the
bandwidth, from real decoder generations, ``fit_decoder``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, ValidationError

from edgetwin.calibration.fit_check import TooFewPoints
from edgetwin.calibration.fit_decoder import (
    METRICS,
    decoder_key,
    fit_compute_and_memory,
    fit_memory,
    memory_section,
    single_device_ms,
)
from edgetwin.calibration.fit_traces import (
    COMPUTE_BOUNDS,
    COPY_BOUNDS,
    NETWORK_BOUNDS,
    STAGING_BOUNDS,
    ComponentFit,
    GroupKey,
    NotPositiveTime,
    blas_kernel,
    compute_groups,
    compute_predictor,
    copy_groups,
    copy_predictor,
    exchange_gaps,
    exchange_groups,
    exchange_key,
    fit_groups,
    network_predictor,
    staging_predictor,
)
from edgetwin.calibration.held_out import HoldoutBy, held_out_block, with_base_residuals
from edgetwin.calibration.profile_io import (
    FIXABLE_SECTIONS,
    ProfileFacts,
    check_fixed,
    parameter_section,
    source_record,
)
from edgetwin.calibration.readers.decoder_latency import (
    DECODER_LATENCY_FILE,
    DecoderLatency,
    read_decoder_latency,
)
from edgetwin.calibration.readers.energy import energy_by_phase
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
from edgetwin.comparison import relative_pct
from edgetwin.decoder_spec import DecoderSpec
from edgetwin.errors import InputError, shown
from edgetwin.model_spec import ModelSpec
from edgetwin.profile import (
    ComputeParams,
    DeviceProfile,
    MemoryParams,
    load_profile,
    profile_path,
)
from edgetwin.progress import Progress, no_progress
from edgetwin.schema import Seed, Strict, load_yaml_model, validation_error

_LOG = logging.getLogger(__name__)  # notices: a held-out value that leaves nothing to refit

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


def fit_sections(
    spec: TraceCalibrationSpec,
    data: TraceData,
    holdout: Holdout | None = None,
    base: DeviceProfile | None = None,
    progress: Progress = no_progress,
) -> dict[str, ComponentFit]:
    """Fit every requested section the data allows, without the ``holdout`` records; the
    memory bandwidth on the fitted compute section (else ``base``'s). A section with too
    few distinct points for its parameters is ``TooFewPoints``; in a held-out refit it is
    left out instead (its held-out records get no point, and ``_note_unrefitted`` says so).
    ``progress`` counts the fits' solves (each fit's and its bootstrap resamples'), the fits
    planned before the first runs."""
    rng = np.random.default_rng(spec.seed)
    excluded_batch = holdout.value if holdout is not None and holdout.by == "batch" else None
    latencies = [r for r in data.latencies if holdout is None or not holdout.covers(r)]
    exchanges = [r for r in data.exchanges if holdout is None or not holdout.covers(r)]
    fits: dict[str, ComponentFit] = {}
    not_fitted = not_fitted_values(spec, base)

    def fixed(section: str) -> dict[str, float]:
        prefix = f"{section}."
        return {k.removeprefix(prefix): v for k, v in not_fitted.items() if k.startswith(prefix)}

    planned: list[Callable[[Callable[[], None]], None]] = []

    def fit_into(names: tuple[str, ...], fit: Callable[..., Any], *args: Any, **kw: Any) -> None:
        def run(on_solve: Callable[[], None]) -> None:
            try:
                fitted = fit(*args, on_solve=on_solve, **kw)
            except TooFewPoints:
                if holdout is None:
                    raise
                return
            fitted = fitted if isinstance(fitted, tuple) else (fitted,)
            fits.update(zip(names, fitted, strict=True))

        planned.append(run)

    decoder = [r for r in data.decoder if holdout is None or not holdout.covers(r)]
    with_decoder = "memory" in spec.fit and decoder and spec.decoder is not None
    with_compute = "compute" in spec.fit and latencies
    if with_compute and with_decoder:
        fit_into(
            ("compute", "memory"),
            fit_compute_and_memory,
            compute_groups(latencies),
            compute_predictor(spec.model),
            decoder,
            spec.decoder,
            fixed("compute"),
            spec.bootstrap,
            rng,
        )
    elif with_compute:
        fit_into(
            ("compute",),
            fit_groups,
            "compute",
            compute_groups(latencies),
            compute_predictor(spec.model),
            COMPUTE_BOUNDS,
            fixed("compute"),
            spec.bootstrap,
            rng,
        )
    if "staging" in spec.fit and exchanges:
        groups = {("d2h", *k): v for k, v in exchange_groups(exchanges, "d2h_ms").items()} | {
            ("h2d", *k): v for k, v in exchange_groups(exchanges, "h2d_ms").items()
        }
        d2h, h2d = staging_predictor("d2h_ms"), staging_predictor("h2d_ms")

        def staging(params: dict[str, float], key: GroupKey) -> float:
            predict = d2h if key[0] == "d2h" else h2d
            return predict(params, key[1:])

        fit_into(
            ("staging",),
            fit_groups,
            "staging",
            groups,
            staging,
            STAGING_BOUNDS,
            fixed("staging"),
            spec.bootstrap,
            rng,
            point_of=_copied,
        )
    if "staging" in spec.fit:
        for pinned in (True, False):
            copies = [c for c in data.copies if c.pinned == pinned and c.batch != excluded_batch]
            if copies:
                name = "copy_pinned" if pinned else "copy_pageable"
                groups = copy_groups(copies)
                fit_into(
                    (name,),
                    fit_groups,
                    name,
                    groups,
                    copy_predictor,
                    COPY_BOUNDS,
                    {},
                    spec.bootstrap,
                    rng,
                )
    if "network" in spec.fit and exchanges:
        blocks = exchanges[0].blocks
        predict = network_predictor(exchange_gaps(exchanges), spec.burst_kb, blocks)
        fit_into(
            ("network",),
            fit_groups,
            "network",
            exchange_groups(exchanges, "comm_ms"),
            predict,
            NETWORK_BOUNDS,
            fixed("network"),
            spec.bootstrap,
            rng,
        )
    if with_decoder and not with_compute:  # on the base's compute: no fit comes before it
        compute = _compute(fits, base)
        if compute is not None:
            fit_into(("memory",), fit_memory, decoder, spec.decoder, compute, spec.bootstrap, rng)
    solves = len(planned) * (1 + spec.bootstrap)  # each fit: one solve and its bootstrap's
    with progress("fits with bootstrap", solves) as advance:
        for run in planned:
            run(advance)
    return fits


def _copied(key: GroupKey) -> GroupKey:
    """The point of a staging group (phase, bandwidth, batch, rows, bytes): an exchange's
    shape; its two copies, at any link rate, are one point (a copy does not depend on the
    link)."""
    return key[2:]


def _compute(fits: dict[str, ComponentFit], base: DeviceProfile | None) -> ComputeParams | None:
    """The compute section a decoder's prediction runs on: the fitted one, else the base's."""
    if "compute" in fits:
        return ComputeParams(
            **{"sync_host_ms": 0.0, "sync_host_ms_per_mb": 0.0, **fits["compute"].params}
        )
    return base.compute if base is not None else None


def _trace_data(spec: TraceCalibrationSpec, spec_path: Path) -> TraceData:
    """The traces folder the spec names, read; one without any trace file is bad input."""
    folder = (spec_path.parent / spec.traces).resolve()
    if not folder.is_dir():
        raise InputError(spec_path, "traces", f"no trace folder at {shown(str(folder))}")
    data = TraceData(folder)
    if not data.files:
        raise InputError(spec_path, "traces", f"no trace file in {shown(str(folder))}")
    return data


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


def _check_decoder(spec: TraceCalibrationSpec, spec_path: Path, data: TraceData) -> None:
    if "memory" in spec.fit and data.decoder and spec.decoder is None:
        problem = f"{DECODER_LATENCY_FILE} needs the decoder it ran (e.g. {{preset: gpt2_small}})"
        raise InputError(spec_path, "decoder", problem)
    if spec.decoder is None:
        return
    positions = spec.decoder.max_positions
    for row in data.decoder:  # a generation the decoder cannot run was not measured on it
        if row.prompt_tokens + row.output_tokens > positions:
            problem = (
                f"a generation of {row.prompt_tokens} prompt and {row.output_tokens} output "
                f"tokens exceeds the decoder's {positions} positions (the spec's decoder is "
                "not the one measured?)"
            )
            raise InputError(data.folder / DECODER_LATENCY_FILE, "prompt_tokens", problem)


def power_from_samples(data: TraceData) -> dict[str, float]:
    """Power per state from labelled power samples (NVML or jtop).

    idle: the samples before the first labelled work (later "idle" stretches
    hold warm-up work); compute: the largest-batch ViT phase (a fully used
    GPU); staging and comm: the exchange phase (``gloo``).
    """
    first_work = next((i for i, s in enumerate(data.power) if s.phase != "idle"), 0)
    phases = [s.phase for s in data.power if s.phase is not None]
    vit = [phase for phase in phases if phase.removeprefix("vit_b").isdigit()]
    if first_work < 2 or not vit or "gloo" not in {s.phase for s in data.power}:
        problem = "needs two idle samples first, then labelled vit_b<batch> and gloo phases"
        raise InputError(data.power_file, "phase", problem)
    idle_w = energy_by_phase(data.power[:first_work])[0].mean_power_w
    by_phase = {p.phase: p for p in energy_by_phase(data.power)}
    largest = max(vit, key=lambda n: int(n[5:]))
    exchange_w = by_phase["gloo"].mean_power_w
    return {
        "idle_w": round(idle_w, 3),
        "compute_w": round(by_phase[largest].mean_power_w, 3),
        "host_w": round(idle_w, 3),
        "staging_w": round(exchange_w, 3),
        "comm_w": round(exchange_w, 3),
        "load_w": round(idle_w, 3),
    }


def _power_source(spec: TraceCalibrationSpec, data: TraceData, base: DeviceProfile | None) -> str:
    """Where the profile's powers come from, as the fit report says it."""
    if "power" in spec.fit and data.power_file is not None:
        return f"= mean of labelled {data.power_log} samples"
    if any(key.startswith("power.") for key in spec.fixed):
        return "fixed in the spec"
    return "from the base profile" if base is not None else "not measured"


def _fit_sections_of(
    spec_path: Path,
    spec: TraceCalibrationSpec,
    data: TraceData,
    holdout: Holdout | None,
    base: DeviceProfile | None,
    progress: Progress = no_progress,
) -> dict[str, ComponentFit]:
    """``fit_sections``; a measured time of 0 ms or less is bad input in the traces folder,
    and too few distinct points for a section's parameters in the file it is fitted from."""
    try:
        return fit_sections(spec, data, holdout, base, progress)
    except NotPositiveTime as error:
        problem = f"{error}; a fit on log errors needs times above 0 (drop the section from fit)"
        raise InputError(spec_path.parent / spec.traces, error.section, problem) from None
    except TooFewPoints as error:
        raise InputError(_file_of(data, error.section), None, error.problem) from None


def _file_of(data: TraceData, fit: str) -> Path:
    """The trace file a fit (a profile section, or a plain copy fit) reads; the folder if
    none is named for it."""
    names = FIT_FILES.get(fit, ())
    return next((path for path in data.files if path.name in names), data.folder)


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


def _check_requested_data(spec: TraceCalibrationSpec, spec_path: Path, data: TraceData) -> None:
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
            raise InputError(spec_path, f"fit.{i}", problem)


def calibrate_from_traces(
    spec_path: Path, command: str, progress: Progress = no_progress
) -> DeviceProfile:
    """The profile a ``kind: traces`` spec describes, with fit report and provenance;
    ``progress``: its fits, then its held-out refits (``fit.held_out``)."""
    spec = load_trace_spec(spec_path)
    data = _trace_data(spec, spec_path)
    _check_decoder(spec, spec_path, data)
    _check_requested_data(spec, spec_path, data)
    base = _base(spec, spec_path)
    fits = _fit_sections_of(spec_path, spec, data, None, base, progress)
    sections: dict[str, Any] = {}
    if base is not None:
        sections = base.model_dump(include={"compute", "staging", "network", "power"})
    for name, fit in fits.items():
        if name in PROFILE_SECTIONS:  # plain copy fits are reported, not used by the twin
            sections[name] = {**sections.get(name, {}), **fit.params}
    if "memory" in fits:
        sections["memory"] = memory_section(fits["memory"], command)
    for key, value in not_fitted_values(spec, base).items():
        section, param = key.split(".", 1)
        sections.setdefault(section, {})[param] = value
    fitted = set(fits)
    if "power" in spec.fit and data.power:
        sections["power"] = power_from_samples(data)
        fitted.add("power")
    _check_every_parameter_set(spec_path, spec, sections, fitted)
    fit_report = {
        "method": "per-section least squares on log errors of group means (scipy); "
        f"bootstrap over repetitions, {spec.bootstrap} resamples; power "
        + _power_source(spec, data, base),
        "sources": [source_record(p) for p in data.files],
        "command": command,
        "blas_kernel": blas_kernel(),
        "median_abs_error_pct": {
            name: fit.summary()["median_abs_error_pct"] for name, fit in fits.items()
        },
        "sections": {name: fit.summary() for name, fit in fits.items()},
        "bootstrap_samples": {name: fit.samples for name, fit in fits.items()},
        "held_out": with_base_residuals(
            held_out_block(leave_one_out(spec_path, "batch", progress), "batch"), base, spec.fit
        ),
    }
    try:
        return DeviceProfile.model_validate(
            {**spec.profile.model_dump(), **sections, "fit": fit_report}
        )
    except ValidationError as exc:
        raise validation_error(exc, spec_path, DeviceProfile) from None


SHOWN_UNSET = 3  # parameters an error names before counting the rest


def _check_every_parameter_set(
    spec_path: Path, spec: TraceCalibrationSpec, sections: dict[str, Any], fitted: set[str]
) -> None:
    """An InputError naming the spec's ``fit`` unless every parameter a profile needs has a
    source: a section fitted from the traces, the base profile, or ``fixed``. (A section
    neither fitted nor in a base was reported as missing only when ``fixed`` set none of
    its parameters; with one fixed, the profile check named a field the spec does not
    have, ``compute.throughput_gflops: required key is missing``.) A parameter of a section
    that is fitted is one its fit does not set (``compute.sync_host_ms``: no trace has a
    synchronised block): the advice to fit its section, which the spec already does, was
    no way out."""
    unset: dict[bool, list[str]] = {True: [], False: []}
    for name, params in FIXABLE_SECTIONS.items():
        for param, field in params.model_fields.items():
            if field.is_required() and param not in sections.get(name, {}):
                unset[name in fitted].append(f"{name}.{param}")
    problems = []
    if unset[False]:
        problems.append(
            f"nothing sets {_shown_unset(unset[False])}: fit their sections from the traces "
            f"(fit: {list(spec.fit)}), name a base profile, or give them in fixed"
        )
    if unset[True]:
        names = _shown_unset(unset[True])
        sections_fitted = " and ".join(dict.fromkeys(key.split(".")[0] for key in unset[True]))
        them = "it" if len(unset[True]) == 1 else "them"
        problems.append(
            f"nothing sets {names}: the {sections_fitted} fit from the traces does not set "
            f"{them}; give {them} in fixed or name a base profile"
        )
    if problems:
        raise InputError(spec_path, "fit", "; ".join(problems))


def _shown_unset(keys: list[str]) -> str:
    more = f" and {len(keys) - SHOWN_UNSET} more" if len(keys) > SHOWN_UNSET else ""
    return f"{', '.join(keys[:SHOWN_UNSET])}{more}"


@dataclass(frozen=True)
class Holdout:
    """Records left out of a fit: one batch size, one link bandwidth or one decoder
    prompt length."""

    by: HoldoutBy
    value: float

    def covers(self, record: VitLatency | StagedExchange | DecoderLatency) -> bool:
        if self.by == "batch":
            return record.batch == self.value
        if self.by == "prompt":
            return isinstance(record, DecoderLatency) and record.prompt_tokens == self.value
        return isinstance(record, StagedExchange) and record.bandwidth_mbps == self.value


def leave_one_out(
    spec_path: Path, by: HoldoutBy, progress: Progress = no_progress
) -> list[dict[str, Any]]:
    """Refit without each batch size (or bandwidth, or prompt length) and predict what was
    left out: the whole-model latency, the staged exchange total of a forward, and a
    decoder generation's TTFT and TPOT. ``progress`` counts the refits."""
    spec = load_trace_spec(spec_path).model_copy(update={"bootstrap": 0})
    data = _trace_data(spec, spec_path)
    _check_decoder(spec, spec_path, data)
    base = _base(spec, spec_path)
    values: set[float]
    if by == "batch":
        values = {r.batch for r in data.latencies} | {r.batch for r in data.exchanges}
        values |= {r.batch for r in data.decoder}
    elif by == "prompt":
        values = {r.prompt_tokens for r in data.decoder}
    else:
        values = {r.bandwidth_mbps for r in data.exchanges if r.bandwidth_mbps is not None}
    points: list[dict[str, Any]] = []
    with progress(f"held-out refits (by {by})", len(values)) as advance:
        for value in sorted(values):
            holdout = Holdout(by, value)
            fits = _fit_sections_of(spec_path, spec, data, holdout, base)
            _note_unrefitted(spec, data, fits, holdout)
            if "compute" in fits:
                points += _compute_points(spec, data, fits["compute"], holdout)
            if {"staging", "network"} <= fits.keys():
                points += _exchange_points(spec, data, fits, holdout)
            if "memory" in fits:
                points += _decoder_points(spec, data, fits, holdout, base)
            advance()
    return points


def _compute_points(
    spec: TraceCalibrationSpec, data: TraceData, compute: ComponentFit, holdout: Holdout
) -> list[dict[str, Any]]:
    """The held-out ViT latencies (whole model and per part) against the refit's compute."""
    predict = compute_predictor(spec.model)
    points = []
    for key, reps in compute_groups(data.latencies).items():
        if holdout.covers(VitLatency(key[0], key[1], key[2], 0, 0.0)):
            predicted = predict(compute.params, key)
            if key[0] == VIT_FULL:
                points.append(_point("vit_full_ms", key, reps, predicted, holdout.value))
            points.append(_point("compute_ms", key, reps, predicted, holdout.value))
    return points


def _note_unrefitted(
    spec: TraceCalibrationSpec, data: TraceData, fits: dict[str, ComponentFit], holdout: Holdout
) -> None:
    """Log (a notice on the command's stderr) each section the held-out value leaves with
    no record, or too few distinct points, to refit: its held-out records get no point,
    where they would otherwise be left out without a word."""
    held: list[
        tuple[tuple[Section, ...], str, Sequence[VitLatency | StagedExchange | DecoderLatency]]
    ] = [
        (("compute",), "compute", data.latencies),
        (("staging", "network"), "exchange", data.exchanges),
        (("memory",), "decoder", data.decoder),
    ]
    for sections, points, records in held:
        unrefitted = [s for s in sections if s in spec.fit and s not in fits]
        if unrefitted and any(map(holdout.covers, records)):
            kept = any(not holdout.covers(record) for record in records)
            _LOG.warning(
                "validation: %s %g gives no held-out %s points: without it, %s holds %s to"
                " refit %s from",
                holdout.by,
                holdout.value,
                points,
                " or ".join(SECTION_FILES[unrefitted[0]]),
                "too few distinct points" if kept else "no record",
                unrefitted[0],
            )


def _decoder_points(
    spec: TraceCalibrationSpec,
    data: TraceData,
    fits: dict[str, ComponentFit],
    holdout: Holdout,
    base: DeviceProfile | None,
) -> list[dict[str, Any]]:
    """TTFT and TPOT of each held-out generation group against its fastest repetition."""
    assert spec.decoder is not None
    compute = _compute(fits, base)
    assert compute is not None
    memory = MemoryParams(**fits["memory"].params)
    groups: dict[GroupKey, list[DecoderLatency]] = {}
    for record in data.decoder:
        if holdout.covers(record):
            groups.setdefault(decoder_key(record), []).append(record)
    points = []
    for key, records in groups.items():
        predicted = dict(
            zip(METRICS, single_device_ms(spec.decoder, compute, memory, key), strict=True)
        )
        for metric in METRICS:
            fastest = [min(getattr(r, metric) for r in records)]
            points.append(_point(metric, key, fastest, predicted[metric], holdout.value))
    return points


def _exchange_points(
    spec: TraceCalibrationSpec,
    data: TraceData,
    fits: dict[str, ComponentFit],
    holdout: Holdout,
) -> list[dict[str, Any]]:
    blocks = data.exchanges[0].blocks
    comm = network_predictor(exchange_gaps(data.exchanges), spec.burst_kb, blocks)
    d2h, h2d = staging_predictor("d2h_ms"), staging_predictor("h2d_ms")
    held: dict[GroupKey, list[StagedExchange]] = {}
    for record in data.exchanges:
        if holdout.covers(record):
            held.setdefault(exchange_key(record), []).append(record)
    staging, network = fits["staging"].params, fits["network"].params
    points = []
    for key, records in held.items():
        parts = {
            "staging_ms": blocks * (d2h(staging, key) + h2d(staging, key)),
            "comm_ms": blocks * comm(network, key),
        }
        measured = {
            "staging_ms": [r.d2h_ms + r.h2d_ms for r in records],
            "comm_ms": [r.comm_ms for r in records],
        }
        total = [r.total_ms for r in records]
        point = _point("exchange_total_ms", key, total, sum(parts.values()), holdout.value)
        points.append({**point, "parts": parts})
        for metric, predicted in parts.items():
            points.append(_point(metric, key, measured[metric], predicted, holdout.value))
    return points


def _point(
    metric: str, key: GroupKey, reps: list[float], predicted: float, held_out: float
) -> dict[str, Any]:
    """One held-out group: its mean against the prediction; ``reps`` and ``held_out`` (the
    value left out of its fit) for the prediction intervals' residuals."""
    measured = float(np.mean(reps))
    return {
        "metric": metric,
        "point": " ".join(str(k) for k in key),
        "measured": round(measured, 4),
        "predicted": round(predicted, 4),
        "error_pct": round(relative_pct(predicted, measured), 2),
        "held_out": held_out,
        "reps": reps,
    }
