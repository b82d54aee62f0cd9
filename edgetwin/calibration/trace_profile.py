"""A device profile from a folder of hardware traces (``kind: traces`` specs): the spec
and its traces read (``trace_inputs``), the fits planned and run (``trace_fits``), the
held-out refits (``trace_holdout``) in the profile's fit report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from edgetwin.calibration.fit_check import at_bound_block, bound_record
from edgetwin.calibration.fit_decoder import memory_section
from edgetwin.calibration.group_fit import blas_kernel
from edgetwin.calibration.held_out import held_out_block, with_base_residuals
from edgetwin.calibration.profile_io import FIXABLE_SECTIONS, source_record
from edgetwin.calibration.readers.energy import energy_by_phase
from edgetwin.calibration.trace_fits import plan_fits, planned_parameters, run_fits
from edgetwin.calibration.trace_holdout import leave_one_out
from edgetwin.calibration.trace_inputs import (
    PROFILE_SECTIONS,
    TraceCalibrationSpec,
    TraceData,
    check_requested_data,
    not_fitted_values,
    read_inputs,
)
from edgetwin.calibration.unit_check import slow_columns
from edgetwin.errors import InputError
from edgetwin.profile import DeviceProfile
from edgetwin.progress import Steps, no_progress
from edgetwin.schema import validation_error


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


def calibrate_from_traces(
    spec_path: Path, command: str, progress: Steps = no_progress
) -> DeviceProfile:
    """The profile a ``kind: traces`` spec describes, with fit report and provenance;
    ``progress``: its fits, then its held-out refits (``fit.held_out``)."""
    inputs = read_inputs(spec_path)
    spec, data, base = inputs.spec, inputs.data, inputs.base
    check_requested_data(spec, spec_path, data)
    power = power_from_samples(data) if "power" in spec.fit and data.power else None
    plan = plan_fits(spec, data, None, base)
    fitted = {name for planned in plan for name in planned.names}
    if power is not None:
        fitted.add("power")
    set_by = _parameters_set(spec, base, planned_parameters(plan), power)
    _check_every_parameter_set(spec_path, spec, set_by, fitted)  # before the fits run
    fits = run_fits(spec_path, spec, data, plan, None, progress)
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
    if power is not None:
        sections["power"] = power
    fit_report = {
        "method": "per-section least squares on log errors of group means (scipy); "
        f"bootstrap over repetitions, {spec.bootstrap} resamples; power "
        + _power_source(spec, data, base),
        "sources": [source_record(p) for p in data.files],
        "command": command,
        "blas_kernel": blas_kernel(),
        **_listed("slow_columns", slow_columns(data, spec.model)),
        **at_bound_block(
            bound_record(f"{name}.{param}", fit.params[param], reached, name)
            for name, fit in fits.items()
            for param, reached in fit.at_bound.items()
        ),
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


def _listed(key: str, lines: list[str]) -> dict[str, list[str]]:
    """``{key: lines}`` for a profile's ``fit``; nothing when there are none (no key)."""
    return {key: lines} if lines else {}


SHOWN_UNSET = 3  # parameters an error names before counting the rest


def _parameters_set(
    spec: TraceCalibrationSpec,
    base: DeviceProfile | None,
    fitted: dict[str, set[str]],
    power: dict[str, float] | None,
) -> dict[str, set[str]]:
    """The parameters a profile made by the plan will hold, by section: the base's, those
    the fits set, the spec's ``from_base`` and ``fixed``; power samples replace the power
    section (as they do in the profile)."""
    known: dict[str, set[str]] = {}
    if base is not None:
        for name, params in base.model_dump(include=set(FIXABLE_SECTIONS)).items():
            known[name] = set(params)
    for name, params in fitted.items():
        known.setdefault(name, set()).update(params)
    for key in not_fitted_values(spec, base):
        section, param = key.split(".", 1)
        known.setdefault(section, set()).add(param)
    if power is not None:
        known["power"] = set(power)
    return known


def _check_every_parameter_set(
    spec_path: Path, spec: TraceCalibrationSpec, set_by: dict[str, set[str]], fitted: set[str]
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
            if field.is_required() and param not in set_by.get(name, set()):
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
