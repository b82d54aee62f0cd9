"""Leave one batch size out: refit a table without each batch size and predict its rows.

A batch whose removal leaves a section nothing, or too little, to refit from gives no
held-out points, and a warning names the batch and the column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgetwin.calibration.fit_check import TOO_FEW_LEFT, TooFewPoints
from edgetwin.calibration.held_out import HeldOutRefits
from edgetwin.calibration.reference_fitter import fit_by_component
from edgetwin.calibration.reference_inputs import (
    FIT_COLUMNS,
    TIMING_METRICS,
    CalibrationSpec,
    MeasuredRow,
    check_fittable,
    encoder_scenario,
    load_spec,
    read_measured,
    unfitted_by_column,
)
from edgetwin.calibration.reference_power import with_fitted_watts
from edgetwin.calibration.reference_twin import simulate_config
from edgetwin.comparison import key_label, relative_pct
from edgetwin.profile import DeviceProfile
from edgetwin.progress import Steps, no_progress
from edgetwin.row_keys import row_key
from edgetwin.scenario import Scenario
from edgetwin.schema import referenced_file


@dataclass(frozen=True)
class TableInputs:
    """What a measured table's refits read: the spec at ``spec_path``, its scenario and its
    rows."""

    spec_path: Path
    spec: CalibrationSpec
    scenario: Scenario
    measured: Sequence[MeasuredRow]


def read_table_inputs(spec_path: Path) -> TableInputs:
    """The spec at ``spec_path``, the scenario and the table it names (checked fittable)."""
    spec = load_spec(spec_path)
    base = spec_path.parent
    scenario_path = referenced_file(spec.scenario, base, spec_path, "scenario").resolve()
    scenario = encoder_scenario(spec_path, scenario_path)
    reference = referenced_file(spec.reference, base, spec_path, "reference").resolve()
    measured = read_measured(reference)
    check_fittable(reference, measured, spec.fixed)
    return TableInputs(spec_path, spec, scenario, measured)


def leave_one_batch_out_table(spec_path: Path, progress: Steps = no_progress) -> HeldOutRefits:
    """Refit without each batch size of the measured table and predict that batch's rows
    (none when the table has one batch size, or a section's only rows, or all but too few
    for its parameters, are that batch's: a refit on no rows is its starting point, on too
    few any law; a warning names the batch and the column). ``progress`` counts the
    batch sizes."""
    inputs = read_table_inputs(spec_path)
    batches = sorted({row.config.batch for row in inputs.measured})
    points: list[dict[str, Any]] = []
    warnings: list[str] = []
    with progress("held-out refits (by batch)", len(batches)) as advance:
        for batch in batches:
            refits = refit_without_batch(inputs, batch)
            points += refits.points
            warnings += refits.warnings
            advance(f"batch {batch} held out")
    return HeldOutRefits(points, warnings)


def refit_without_batch(inputs: TableInputs, batch: int) -> HeldOutRefits:
    """One refit of ``leave_one_batch_out_table``: the rows of ``batch`` predicted by a
    refit without them (none, with a warning, when the rest cannot be refitted)."""
    spec, scenario, measured = inputs.spec, inputs.scenario, inputs.measured
    kept = [row for row in measured if row.config.batch != batch]
    if not kept:  # one batch size: nothing to leave out (validate says so)
        return HeldOutRefits([], [])
    unfitted = unfitted_by_column(kept, spec.fixed)
    if unfitted:  # a section refitted on no row would be its starting point
        columns = " or ".join(sorted(unfitted))
        warning = (
            f"validation: batch {batch} gives no held-out points: without it, no row has a"
            f" value of {columns} to refit from"
        )
        return HeldOutRefits([], [warning])
    profile, metrics, warnings = _refit(spec, scenario, kept, batch, inputs.spec_path)
    if profile is None:
        return HeldOutRefits([], warnings)
    points = []
    for row in measured:
        if row.config.batch != batch:
            continue
        predicted = simulate_config(scenario, profile, row.config).row
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
    return HeldOutRefits(points, warnings)


def _refit(
    spec: CalibrationSpec,
    scenario: Scenario,
    kept: Sequence[MeasuredRow],
    batch: int,
    spec_path: Path,
) -> tuple[DeviceProfile | None, tuple[str, ...], list[str]]:
    """The refit on ``kept``, the metrics it predicts and a warning of those it does not:
    every one, or the times alone where the rows left are too few to refit the watts from
    (its energy gets no point), or none where a timing section cannot be refitted."""
    try:
        timing = fit_by_component(spec, scenario, kept, spec_path, power=False)
    except TooFewPoints as error:
        return None, (), [_too_few_warning(batch, error)]
    try:
        fitted = with_fitted_watts(scenario, timing, kept, spec.fixed)
    except TooFewPoints as error:
        return timing, TIMING_METRICS, [_too_few_warning(batch, error)]
    return fitted, (*TIMING_METRICS, "energy_j"), []


def _too_few_warning(batch: int, error: TooFewPoints) -> str:
    """The warning of a held-out batch whose rows left are too few to refit a section."""
    return (
        f"validation: batch {batch} gives no held-out "
        f"{'energy_j ' if error.section == 'power' else ''}points: without it, "
        f"{FIT_COLUMNS[error.section]} has {error.points} distinct points, {TOO_FEW_LEFT} to "
        f"refit {len(error.parameters)} parameters from"
    )
