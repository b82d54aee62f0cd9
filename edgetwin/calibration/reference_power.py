"""The watts per power state of a table fit, by non-negative least squares: the twin
reports how long each device spent in each state, and energy is linear in the powers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.optimize import nnls

from edgetwin.calibration.fit_check import bound_record, check_enough_points, with_at_bound
from edgetwin.calibration.reference_inputs import MeasuredRow
from edgetwin.calibration.reference_twin import simulate_config
from edgetwin.errors import InputError
from edgetwin.profile import POWER_STATES, DeviceProfile
from edgetwin.scenario import Scenario


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
    return with_at_bound(with_watts, [bound_record(p, 0.0, zero, "power") for p in at_zero])


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
        outcome = simulate_config(scenario, profile, row.config)
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
