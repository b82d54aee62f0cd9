"""Fit a device profile to a measured table in the results schema.

The twin itself is the model being fitted: for a candidate parameter vector
the twin runs every configuration of the table, and scipy's least squares
moves the timing parameters to minimise the log error of the measured
columns. A table fit goes by component: the GPU (throughput, launch floor)
from the one-device rows, whose compute is GPU time alone, then every other
timing parameter from the compute, staging and communication columns, the
total left out (it is their sum, and weighting it would let one component's
error pay for another's). Power per state then follows by non-negative least
squares: the twin reports how long each device spent in each state, and
energy is linear in the powers.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field
from scipy.optimize import least_squares, nnls

from edgetwin.calibration.fit_check import (
    TooFewPoints,
    at_bound,
    at_bound_block,
    bound_record,
    bounds_reached,
    check_enough_points,
)
from edgetwin.calibration.held_out import held_out_block
from edgetwin.calibration.profile_io import (
    FIXABLE_SECTIONS,
    ProfileFacts,
    check_fixed,
    source_record,
)
from edgetwin.comparison import compare_to_reference, key_label, relative_pct
from edgetwin.csv_rows import Row, read_header, read_rows
from edgetwin.decoder_spec import DecoderSpec
from edgetwin.errors import InputError
from edgetwin.models import registry
from edgetwin.profile import POWER_STATES, DeviceProfile
from edgetwin.progress import Progress, no_progress
from edgetwin.results import (
    COLUMNS,
    LATENCY_PARTS,
    STATUS_OK,
    CellError,
    check_cells,
    read_table,
    row_key,
)
from edgetwin.scenario import Configuration, DeviceSpec, Scenario, load_scenario
from edgetwin.schema import Strict, load_yaml_model, referenced_file
from edgetwin.sim.runner import FleetMember, RunOutcome, simulate

_LOG = logging.getLogger(__name__)  # notices: a held-out batch that leaves nothing to refit

TIMING_METRICS = (*LATENCY_PARTS, "total_ms")
TOTAL_WEIGHT = 2.0  # the total matters most to a user; components keep the split honest

# (path in the profile, lower bound, upper bound, start)
Parameter = tuple[str, float, float, float]
GPU_PARAMETERS: tuple[Parameter, ...] = (
    ("compute.throughput_gflops", 10.0, 1e6, 500.0),
    ("compute.launch_floor_ms", 0.0, 50.0, 1.0),
)
TIMING_PARAMETERS: tuple[Parameter, ...] = (
    *GPU_PARAMETERS,
    ("compute.sync_host_ms", 0.0, 100.0, 5.0),
    ("compute.sync_host_ms_per_mb", 0.0, 1000.0, 5.0),
    ("staging.fixed_ms", 0.0, 50.0, 0.5),
    ("staging.ms_per_mb", 0.0, 1000.0, 5.0),
    ("network.message_overhead_ms", 0.0, 50.0, 0.5),
    ("network.bandwidth_efficiency", 0.1, 2.0, 1.0),
)
# a table of a profiled split also fits the copy's wait for queued GPU work and the extra
# cost of a copy above the spec's large_copy_kb (copies stay linear in bytes)
TABLE_PARAMETERS: tuple[Parameter, ...] = (
    *TIMING_PARAMETERS,
    ("staging.d2h_wait_ms_per_mb", 0.0, 100.0, 1.0),
    ("staging.large_copy_ms", 0.0, 50.0, 1.0),
)


class CalibrationSpec(Strict):
    """A calibration job: facts, the measured table and the scenario giving model and network."""

    kind: Literal["table"] = "table"
    profile: ProfileFacts
    reference: str
    scenario: str
    fixed: dict[str, float] = Field(default_factory=dict)  # section.parameter: value


@dataclass(frozen=True)
class MeasuredRow:
    config: Configuration
    values: dict[str, float]  # metric -> measured value (present ones only)


def load_spec(path: Path) -> CalibrationSpec:
    spec = load_yaml_model(path, CalibrationSpec)
    check_fixed(path, spec.fixed, FIXABLE_SECTIONS)
    return spec


MEASURED_KEY_COLUMNS = ("strategy", "devices", "batch", "bandwidth_mbps")
# the column each timing section of a table fit is fitted from
SECTION_COLUMNS = {"compute": "compute_ms", "staging": "staging_ms", "network": "comm_ms"}
# ... and of every fit of a table, the watts' included (an error names it)
FIT_COLUMNS = {**SECTION_COLUMNS, "power": "energy_j"}


def read_measured(path: Path) -> list[MeasuredRow]:
    """Rows of a measured table; a malformed cell names file, column and line."""
    if not path.is_file():
        raise InputError(path, None, "file not found")
    return [_measured_row(row) for row in read_rows(path, MEASURED_KEY_COLUMNS)]


def _measured_row(row: Row) -> MeasuredRow:
    """One configuration the twin can run (a strategy with an encoder cost plan, on one
    device for the one-device strategy and on two or more for a split, at least one
    sample, a positive finite bandwidth, segments exactly where the strategy takes them)
    and its measured metrics, those filled in (each a finite number >= 0). A row of a
    decoder or crowd strategy, or a split on one device, ended in a traceback of the
    twin (ValueError, IndexError for ``single`` on two devices). Every other results column
    it has reads as in a results table (a CR of 'abc' was let through unread)."""
    values = {
        metric: value
        for metric in (*TIMING_METRICS, "energy_j")
        if (value := row.optional_number(metric, minimum=0.0)) is not None
    }
    config = Configuration(
        strategy=row.choice("strategy", registry.encoder_names()),
        devices=row.integer("devices", minimum=1),
        batch=row.integer("batch", minimum=1),
        bandwidth_mbps=row.positive("bandwidth_mbps"),
        segments=row.optional_integer("segments", minimum=1),
    )
    definition = registry.strategy(config.strategy)
    if definition.one_device and config.devices != 1:
        raise row.error("devices", f"{config.strategy} runs on 1 device, not {config.devices}")
    if not definition.one_device and config.devices < 2:
        problem = f"{config.strategy} runs on 2 or more devices, not {config.devices}"
        raise row.error("devices", problem)
    if definition.params and config.segments is None:
        raise row.error("segments", f"a {config.strategy} row needs its segments (at least 1)")
    if not definition.params and config.segments is not None:
        raise row.error("segments", f"{config.strategy} takes no segments")
    try:
        check_cells(row.cells, COLUMNS)
    except CellError as exc:
        raise row.error(exc.column, exc.problem) from None
    return MeasuredRow(config, values)


def fit_profile(
    spec_path: Path | str, command: str, progress: Progress = no_progress
) -> DeviceProfile:
    """Fit timing then power parameters; the profile records residuals, provenance, ``command``.
    ``progress`` counts the fit (one step), then the held-out refits (one a batch size)."""
    spec_path = Path(spec_path)
    spec = load_spec(spec_path)
    base = spec_path.parent
    reference = referenced_file(spec.reference, base, spec_path, "reference").resolve()
    scenario_path = referenced_file(spec.scenario, base, spec_path, "scenario").resolve()
    scenario = _encoder_scenario(spec_path, scenario_path)
    measured = read_measured(reference)
    _check_fittable(reference, measured, spec.fixed)
    try:
        with progress("fit", 1) as advance:
            profile = fit_by_component(spec, scenario, measured, spec_path)
            advance()
    except TooFewPoints as error:
        raise too_few_points_error(reference, error) from None
    report = residual_report(scenario, profile, measured, reference)
    held_out = leave_one_batch_out_table(spec_path, progress)
    return profile.model_copy(
        update={
            "fit": {
                "method": "scipy.optimize.least_squares on log errors of the twin's columns, "
                "by component: GPU from the one-device compute, then compute, staging and "
                "comm (total not weighted); power by non-negative least squares",
                "sources": [
                    source_record(reference),
                    source_record(scenario_path),
                ],
                "command": command,
                "fixed": spec.fixed,
                **at_bound_block(at_bound(profile)),
                **report,
                "held_out": held_out_block(held_out, "batch"),
            }
        }
    )


def _check_fittable(
    reference: Path, measured: Sequence[MeasuredRow], fixed: Mapping[str, float]
) -> None:
    """An InputError naming the measured table's column when a section has parameters to
    fit and no row to fit them from (a column misnamed, left out or empty)."""
    unfitted = _unfitted(measured, fixed)
    if unfitted:
        column, params = next(iter(unfitted.items()))
        problem = (
            f"no row has a value above 0, so nothing fits {', '.join(params)} "
            f"(header: {', '.join(read_header(reference))}); measure it, or set them in "
            f"the spec's fixed"
        )
        raise InputError(reference, column, problem)


def _unfitted(measured: Sequence[MeasuredRow], fixed: Mapping[str, float]) -> dict[str, list[str]]:
    """Per component column no row has a value above 0 in, the parameters not ``fixed``
    that are fitted from it: a fit would leave them at its starting point."""
    unfitted: dict[str, list[str]] = {}
    for path, *_ in TABLE_PARAMETERS:
        column = SECTION_COLUMNS[path.split(".")[0]]
        if path not in fixed and not any(row.values.get(column, 0.0) > 0 for row in measured):
            unfitted.setdefault(column, []).append(path)
    return unfitted


def _encoder_scenario(spec_path: Path, scenario_path: Path) -> Scenario:
    """The spec's scenario; a table fit runs encoder rows (a decoder's are not read yet)."""
    scenario = load_scenario(scenario_path)
    if isinstance(scenario.model, DecoderSpec):
        problem = f"{scenario_path.name} runs a decoder; a table fit runs encoder scenarios"
        raise InputError(spec_path, "scenario", problem)
    return scenario


def leave_one_batch_out_table(
    spec_path: Path, progress: Progress = no_progress
) -> list[dict[str, Any]]:
    """Refit without each batch size of the measured table and predict that batch's rows
    (none when the table has one batch size, or a section's only rows, or all but too few
    for its parameters, are that batch's: a refit on no rows is its starting point, on too
    few any law; a notice names the batch and the column). ``progress`` counts the
    batch sizes."""
    spec = load_spec(spec_path)
    base = spec_path.parent
    scenario_path = referenced_file(spec.scenario, base, spec_path, "scenario").resolve()
    scenario = _encoder_scenario(spec_path, scenario_path)
    reference = referenced_file(spec.reference, base, spec_path, "reference").resolve()
    measured = read_measured(reference)
    _check_fittable(reference, measured, spec.fixed)
    batches = sorted({row.config.batch for row in measured})
    points: list[dict[str, Any]] = []
    with progress("held-out refits (by batch)", len(batches)) as advance:
        for batch in batches:
            points += _held_out_points(spec, scenario, measured, batch, spec_path)
            advance()
    return points


def _held_out_points(
    spec: CalibrationSpec,
    scenario: Scenario,
    measured: Sequence[MeasuredRow],
    batch: int,
    spec_path: Path,
) -> list[dict[str, Any]]:
    """The rows of ``batch`` predicted by a refit without them (none, with a notice, when
    the rest cannot be refitted)."""
    kept = [row for row in measured if row.config.batch != batch]
    if not kept:  # one batch size: nothing to leave out (validate says so)
        return []
    unfitted = _unfitted(kept, spec.fixed)
    if unfitted:  # a section refitted on no row would be its starting point
        columns = " or ".join(sorted(unfitted))
        _LOG.warning(
            "validation: batch %d gives no held-out points: without it, no row has a"
            " value of %s to refit from",
            batch,
            columns,
        )
        return []
    profile, metrics = _refit(spec, scenario, kept, batch, spec_path)
    if profile is None:
        return []
    points = []
    for row in measured:
        if row.config.batch != batch:
            continue
        predicted = _simulate(scenario, profile, row.config).row
        label = key_label(row_key({**row.config.model_dump(), "segments": row.config.segments}))
        for metric, value in row.values.items():
            if value > 0 and metric in metrics:
                estimate = float(getattr(predicted, metric))
                points.append(
                    {
                        "metric": metric,
                        "point": label,
                        "measured": value,
                        "predicted": round(estimate, 4),
                        "error_pct": round(relative_pct(estimate, value), 2),
                        "held_out": batch,
                        "reps": [value],  # a published mean: no repetitions
                    }
                )
    return points


def _refit(
    spec: CalibrationSpec,
    scenario: Scenario,
    kept: Sequence[MeasuredRow],
    batch: int,
    spec_path: Path,
) -> tuple[DeviceProfile | None, tuple[str, ...]]:
    """The refit on ``kept`` and the metrics it predicts: every one, or the times alone
    where the rows left are too few to refit the watts from (its energy gets no point), or
    none where a timing section cannot be refitted; a notice says which."""
    try:
        timing = fit_by_component(spec, scenario, kept, spec_path, power=False)
    except TooFewPoints as error:
        _note_too_few(batch, error)
        return None, ()
    try:
        fitted = with_fitted_watts(scenario, timing, kept, spec.fixed)
    except TooFewPoints as error:
        _note_too_few(batch, error)
        return timing, TIMING_METRICS
    return fitted, (*TIMING_METRICS, "energy_j")


def _note_too_few(batch: int, error: TooFewPoints) -> None:
    """The notice of a held-out batch whose rows left are too few to refit a section."""
    _LOG.warning(
        "validation: batch %d gives no held-out %spoints: without it, %s has %d"
        " distinct points to refit %d parameters from",
        batch,
        "energy_j " if error.section == "power" else "",
        FIT_COLUMNS[error.section],
        error.points,
        len(error.parameters),
    )


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
    ``timing`` or ``power`` fit."""
    fixed = dict(spec.fixed)
    alone = [row for row in measured if row.config.devices == 1]
    gpu_free = [p for p in GPU_PARAMETERS if p[0] not in fixed]
    gpu_at_bound: list[dict[str, Any]] = []
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
    return profile.model_copy(update={"fit": {**profile.fit, **at_bound_block(records)}})


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
    fit named ``fit_name``).

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
            predicted = _simulate(scenario, profile, row.config).row
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
    timing_only = _with_at_bound(timing_only, records)
    return with_fitted_watts(scenario, timing_only, measured, fixed) if power else timing_only


def _with_at_bound(profile: DeviceProfile, records: Sequence[Mapping[str, Any]]) -> DeviceProfile:
    """``profile`` with ``records`` (``fit_check.bound_record``) added to its ``fit.at_bound``."""
    kept = [*at_bound(profile), *records]
    return profile.model_copy(update={"fit": {**profile.fit, **at_bound_block(kept)}})


def with_fitted_watts(
    scenario: Scenario,
    timing: DeviceProfile,
    measured: Sequence[MeasuredRow],
    fixed: Mapping[str, float],
) -> DeviceProfile:
    """``timing`` (a profile of 1 W per state) with its watts fitted from the rows' energy,
    the ``fixed`` ones as given (``TooFewPoints`` where the rows are too few); ``timing``
    itself where no row has energy. A state the rows spend time in that the fit leaves at
    0 W is added to ``fit.at_bound`` (the ``power`` fit)."""
    if not any(row.values.get("energy_j") for row in measured):
        return timing
    fitted, at_zero = _fit_power(scenario, timing, measured, fixed)
    watts = {**fitted, **fixed}
    prefix = "power."
    power = {k.removeprefix(prefix): round(w, 6) for k, w in watts.items() if k.startswith(prefix)}
    with_watts = timing.model_copy(update={"power": timing.power.model_copy(update=power)})
    zero = ("lower", 0.0)
    return _with_at_bound(with_watts, [bound_record(p, 0.0, zero, "power") for p in at_zero])


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


def too_few_points_error(path: Path, error: TooFewPoints) -> InputError:
    """The InputError naming the measured table ``path`` and the column its section is
    fitted from."""
    return InputError(path, FIT_COLUMNS[error.section], error.problem)


def _check_runnable(
    scenario: Scenario,
    profile: DeviceProfile,
    measured: Sequence[MeasuredRow],
    spec_path: Path | None,
) -> None:
    for row in measured:
        status = _simulate(scenario, profile, row.config).row.status
        if status != STATUS_OK:
            label = key_label(row_key({**row.config.model_dump(), "segments": row.config.segments}))
            problem = f"the twin cannot run the measured {label} on this device: {status}"
            raise InputError(spec_path, "profile", problem)


def _simulate(scenario: Scenario, profile: DeviceProfile, config: Configuration) -> RunOutcome:
    spec = DeviceSpec(name="dev", profile=profile, count=config.devices)
    fleet = [FleetMember(f"dev-{i}", spec, profile) for i in range(config.devices)]
    return simulate(scenario, fleet, config, rep=0)


def _unit_power() -> dict[str, float]:
    return {f"power.{state}_w": 1.0 for state in POWER_STATES}


def _profile(facts: ProfileFacts, values: Mapping[str, float]) -> DeviceProfile:
    """A profile from its facts and ``section.parameter`` values."""
    sections: dict[str, dict[str, Any]] = {"compute": {}, "staging": {}, "network": {}}
    for path, value in values.items():
        section, key = path.split(".")
        sections.setdefault(section, {})[key] = round(float(value), 6)
    return DeviceProfile.model_validate({**facts.model_dump(), **sections})


def _fit_power(
    scenario: Scenario,
    profile: DeviceProfile,
    measured: Sequence[MeasuredRow],
    fixed: Mapping[str, float],
) -> tuple[dict[str, float], list[str]]:
    """Watts per state from rows with energy: relative non-negative least squares, the
    ``fixed`` watts (``power.<state>_w``) taken as given. A state no row spends time in
    draws 0 W; the others need as many rows with energy as there are of them
    (``TooFewPoints``): fewer match any energies (a 4-row table gave 1,305 W idle and a
    1 % error). Also the states the rows spend time in that the fit leaves at its bound,
    0 W."""
    free = [s for s in POWER_STATES if f"power.{s}_w" not in fixed]
    rows, targets = [], []
    for row in measured:
        energy = row.values.get("energy_j")
        if energy is None or energy <= 0:
            continue
        outcome = _simulate(scenario, profile, row.config)
        seconds = {
            state: sum(t[state] for t in outcome.time_by_state_ms.values()) / 1e3
            for state in POWER_STATES
        }
        known_j = sum(fixed[f"power.{s}_w"] * seconds[s] for s in POWER_STATES if s not in free)
        rows.append([seconds[state] / energy for state in free])
        targets.append(1.0 - known_j / energy)
    if not rows:
        raise InputError(None, "energy_j", "the measured table has no energy to fit power from")
    design = np.array(rows)
    spent = [k for k, state in enumerate(free) if design[:, k].any()]
    check_enough_points("power", len(rows), [f"{free[k]}_w" for k in spent])
    watts = dict.fromkeys(free, 0.0)
    if spent:
        solved, _ = nnls(design[:, spent], np.array(targets))
        watts |= {free[k]: float(w) for k, w in zip(spent, solved, strict=True)}
    at_zero = [f"power.{free[k]}_w" for k in spent if watts[free[k]] <= 0.0]
    return {f"power.{state}_w": round(w, 4) for state, w in watts.items()}, at_zero


def residual_report(
    scenario: Scenario, profile: DeviceProfile, measured: Sequence[MeasuredRow], reference: Path
) -> dict[str, Any]:
    rows = [_simulate(scenario, profile, row.config).row for row in measured]
    comparison = compare_to_reference(rows, read_table(reference))
    points = [
        {
            "configuration": key_label(p["key"]),
            "metric": p["metric"],
            "measured": p["measured"],
            "predicted": round(p["predicted"], 3),
            "error_pct": None if p["error_pct"] is None else round(p["error_pct"], 2),
        }
        for p in comparison.points
    ]
    medians = {m: round(v, 2) for m, v in comparison.median_abs_error_pct.items()}
    return {"median_abs_error_pct": medians, "residuals": points}
