"""The least-squares fit of a table through the twin.

For a candidate parameter vector the twin runs every measured configuration, and
scipy's least squares moves the timing parameters to minimise the log error of the
measured columns; power per state then follows from the time the twin spent in each
state (``reference_power``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from edgetwin.calibration.fit_check import (
    at_bound,
    at_bound_block,
    bound_record,
    bounds_reached,
    check_enough_points,
    not_pinned,
    not_pinned_block,
    not_pinned_record,
    with_at_bound,
    with_not_pinned,
)
from edgetwin.calibration.profile_io import ProfileFacts
from edgetwin.calibration.reference_inputs import (
    GPU_PARAMETERS,
    SECTION_COLUMNS,
    TABLE_PARAMETERS,
    TIMING_METRICS,
    TIMING_PARAMETERS,
    CalibrationSpec,
    MeasuredRow,
    Parameter,
)
from edgetwin.calibration.reference_power import with_fitted_watts
from edgetwin.calibration.reference_twin import simulate_config
from edgetwin.comparison import key_label
from edgetwin.errors import InputError
from edgetwin.profile import POWER_STATES, DeviceProfile
from edgetwin.results import STATUS_OK
from edgetwin.row_keys import row_key
from edgetwin.scenario import Scenario
from edgetwin.sweep_points import Configuration

TOTAL_WEIGHT = 2.0  # the total matters most to a user; components keep the split honest


def fit_by_component(
    spec: CalibrationSpec,
    scenario: Scenario,
    measured: Sequence[MeasuredRow],
    spec_path: Path | None = None,
    power: bool = True,
) -> DeviceProfile:
    """GPU parameters from the one-device rows (when there are any), then the rest of
    ``TABLE_PARAMETERS`` from the compute, staging and comm columns of every row, then (with
    ``power``) the watts from the energy column (``spec_path``: the file an error names).
    The profile's ``fit.at_bound`` names the parameters a bound stopped, in the ``gpu``,
    ``timing`` or ``power`` fit, and ``fit.not_pinned`` those no row changed with."""
    fixed = dict(spec.fixed)
    alone = [row for row in measured if row.config.devices == 1]
    gpu_free = [p for p in GPU_PARAMETERS if p[0] not in fixed]
    gpu_at_bound: list[dict[str, Any]] = []
    gpu_not_pinned: list[dict[str, Any]] = []
    if alone and gpu_free:
        gpu_paths = {path for path, *_ in gpu_free}
        others = {path: start for path, _, _, start in TABLE_PARAMETERS if path not in gpu_paths}
        gpu = fit_measured(
            spec.profile,
            scenario,
            alone,
            gpu_free,
            others | fixed,
            power=False,
            spec_path=spec_path,
            fit_name="gpu",
        )
        fixed |= {path: _value(gpu, path) for path, *_ in gpu_free}
        gpu_at_bound = at_bound(gpu)
        gpu_not_pinned = not_pinned(gpu)
    profile = fit_measured(
        spec.profile,
        scenario,
        measured,
        TABLE_PARAMETERS,
        fixed,
        total_weight=0.0,
        power=power,
        spec_path=spec_path,
    )
    records = [*gpu_at_bound, *at_bound(profile)]
    unmoved = not_pinned_block([*gpu_not_pinned, *not_pinned(profile)])
    return profile.model_copy(update={"fit": {**profile.fit, **at_bound_block(records), **unmoved}})


def _value(profile: DeviceProfile, path: str) -> float:
    section, name = path.split(".")
    value: float = getattr(getattr(profile, section), name)
    return value


def fit_measured(
    facts: ProfileFacts,
    scenario: Scenario,
    measured: Sequence[MeasuredRow],
    parameters: Sequence[Parameter] = TIMING_PARAMETERS,
    fixed: Mapping[str, float] | None = None,
    expectile: float = 0.5,
    total_weight: float = TOTAL_WEIGHT,
    power: bool = True,
    spec_path: Path | None = None,
    fit_name: str = "timing",
) -> DeviceProfile:
    """Timing ``parameters`` (less the ``fixed`` ones) by least squares through the twin,
    the total weighted ``total_weight`` against each component's 1; then, if ``power``,
    the watts when the rows have energy (``with_fitted_watts``; else 1 W per state, unless
    ``fixed``). The profile's ``fit.at_bound`` names the parameters a bound stopped (the
    fit named ``fit_name``), and ``fit.not_pinned`` those left at their start, no row
    changing with them (not at a bound: ``fit.at_bound`` names those).

    ``expectile`` below 0.5: asymmetric least squares, a measurement slower than the
    prediction weighs ``expectile``, a faster one ``1 - expectile``; where other load only
    ever slows runs down, the fit follows the undisturbed ones. A configuration the twin
    cannot run on the spec's device (it does not fit in ``ram_mb``, its battery is drained)
    is an InputError naming ``spec_path``'s profile: no fit could explain its row.
    """
    fixed = dict(fixed or {})
    free = [p for p in parameters if p[0] not in fixed]
    _check_enough_points(measured, [path for path, *_ in free])
    start = [p[3] for p in free]
    bounds = ([p[1] for p in free], [p[2] for p in free])

    def profile_at(x: Sequence[float] | np.ndarray, power: dict[str, float]) -> DeviceProfile:
        values = {path: float(v) for (path, *_), v in zip(free, x, strict=True)}
        return _profile(facts, {**values, **power, **fixed})

    def residuals(x: np.ndarray) -> np.ndarray:
        profile = profile_at(x, _unit_power())
        errors = []
        for row in measured:
            predicted = simulate_config(scenario, profile, row.config).row
            for metric in TIMING_METRICS:
                value = row.values.get(metric)
                weight = total_weight if metric == "total_ms" else 1.0
                if value is not None and value > 0 and weight > 0:
                    error = math.log(max(getattr(predicted, metric), 1e-9) / value)
                    share = expectile if error < 0 else 1.0 - expectile
                    errors.append(weight * math.sqrt(2 * share) * error)
        return np.array(errors)

    _check_runnable(scenario, profile_at(start, _unit_power()), measured, spec_path)
    fit = least_squares(residuals, start, bounds=bounds, x_scale="jac", diff_step=1e-4)
    timing_only = profile_at(fit.x, _unit_power())
    reached = bounds_reached(
        {path: float(x) for (path, *_), x in zip(free, fit.x, strict=True)},
        {path: (lower, upper) for path, lower, upper, _ in free},
    )
    records = [bound_record(p, _value(timing_only, p), r, fit_name) for p, r in reached.items()]
    timing_only = with_at_bound(timing_only, records)
    unmoved = [
        not_pinned_record(path, float(x), fit_name)
        for (path, *_, begin), x, slopes in zip(free, fit.x, fit.jac.T, strict=True)
        if x == begin and not np.any(slopes) and path not in reached
    ]
    timing_only = with_not_pinned(timing_only, unmoved)
    return with_fitted_watts(scenario, timing_only, measured, fixed) if power else timing_only


def _check_enough_points(measured: Sequence[MeasuredRow], free: Sequence[str]) -> None:
    """``TooFewPoints`` unless each section has enough distinct points (``_point_of``) with a
    value above 0 in its column (``SECTION_COLUMNS``) for its free parameters."""
    for section, column in SECTION_COLUMNS.items():
        prefix = f"{section}."
        names = [path.removeprefix(prefix) for path in free if path.startswith(prefix)]
        points = {_point_of(section, r.config) for r in measured if r.values.get(column, 0.0) > 0}
        check_enough_points(section, len(points), names)


def _point_of(section: str, config: Configuration) -> Configuration:
    """A configuration as far as ``section``'s cost depends on it: compute and copies do not
    depend on the link's bandwidth (rows that differ only in it are one point), the
    exchange does."""
    return config if section == "network" else config.model_copy(update={"bandwidth_mbps": 0.0})


def _check_runnable(
    scenario: Scenario,
    profile: DeviceProfile,
    measured: Sequence[MeasuredRow],
    spec_path: Path | None,
) -> None:
    for row in measured:
        status = simulate_config(scenario, profile, row.config).row.status
        if status != STATUS_OK:
            label = key_label(row_key({**row.config.model_dump(), "segments": row.config.segments}))
            problem = f"the twin cannot run the measured {label} on this device: {status}"
            raise InputError(spec_path, "profile", problem)


def _unit_power() -> dict[str, float]:
    return {f"power.{state}_w": 1.0 for state in POWER_STATES}


def _profile(facts: ProfileFacts, values: Mapping[str, float]) -> DeviceProfile:
    """A profile from its facts and ``section.parameter`` values."""
    sections: dict[str, dict[str, Any]] = {"compute": {}, "staging": {}, "network": {}}
    for path, value in values.items():
        section, key = path.split(".")
        sections.setdefault(section, {})[key] = round(float(value), 6)
    return DeviceProfile.model_validate({**facts.model_dump(), **sections})
