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

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edgetwin.calibration.fit_check import (
    TooFewPoints,
    at_bound,
    at_bound_block,
    not_pinned,
    not_pinned_block,
)
from edgetwin.calibration.held_out import held_out_block
from edgetwin.calibration.profile_io import source_record
from edgetwin.calibration.reference_fitter import fit_by_component
from edgetwin.calibration.reference_holdout import leave_one_batch_out_table
from edgetwin.calibration.reference_inputs import (
    MeasuredRow,
    check_fittable,
    encoder_scenario,
    load_spec,
    read_measured,
    too_few_points_error,
)
from edgetwin.calibration.reference_twin import simulate_config
from edgetwin.comparison import compare_to_reference, key_label
from edgetwin.profile import DeviceProfile
from edgetwin.progress import Steps, no_progress
from edgetwin.scenario import Scenario
from edgetwin.schema import referenced_file
from edgetwin.table_files import read_table


def fit_profile(
    spec_path: Path | str, command: str, progress: Steps = no_progress
) -> DeviceProfile:
    """Fit timing then power parameters; the profile records residuals, provenance, ``command``.
    ``progress`` counts the fit (one step), then the held-out refits (one a batch size)."""
    spec_path = Path(spec_path)
    spec = load_spec(spec_path)
    base = spec_path.parent
    reference = referenced_file(spec.reference, base, spec_path, "reference").resolve()
    scenario_path = referenced_file(spec.scenario, base, spec_path, "scenario").resolve()
    scenario = encoder_scenario(spec_path, scenario_path)
    measured = read_measured(reference)
    check_fittable(reference, measured, spec.fixed)
    try:
        with progress("fit", 1) as advance:
            profile = fit_by_component(spec, scenario, measured, spec_path)
            advance("timing and power")
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
                **not_pinned_block(not_pinned(profile)),
                **report,
                "held_out": held_out_block(held_out, "batch"),
            }
        }
    )


def residual_report(
    scenario: Scenario, profile: DeviceProfile, measured: Sequence[MeasuredRow], reference: Path
) -> dict[str, Any]:
    rows = [simulate_config(scenario, profile, row.config).row for row in measured]
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
