"""Least squares on the group means of trace timings, with bootstrap uncertainty.

Parameters are fitted by least squares on the log error of group means; the
uncertainty comes from a bootstrap over repetitions (reps resampled within
each group, the fit repeated). The parameter sets of the bootstrap are kept
so the twin can sample them for prediction intervals. The groups of a trace:
``trace_groups``; each component's prediction: ``trace_predictors``,
``exchange_replay``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import least_squares
from threadpoolctl import threadpool_info

from edgetwin.calibration.fit_check import (
    BoundReached,
    bounds_reached,
    check_enough_points,
    resample_shares,
)
from edgetwin.comparison import relative_pct

GroupKey = tuple[Any, ...]
# name -> (lower, upper, start)
Bounds = Mapping[str, tuple[float, float, float]]


@dataclass(frozen=True)
class ComponentFit:
    """Fitted parameters of one profile section, their bootstrap spread and residuals;
    ``at_bound``: the parameters a bound of the fit stopped (``fit_check.bounds_reached``);
    ``resamples_at_bound``: the share of the bootstrap's resamples a bound stopped, per
    parameter and side (``fit_check.resample_shares``)."""

    section: str
    params: dict[str, float]
    stderr: dict[str, float]
    samples: list[dict[str, float]]
    residuals: list[dict[str, Any]]
    at_bound: dict[str, BoundReached] = field(default_factory=dict)
    resamples_at_bound: dict[str, dict[str, float]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        errors = [abs(r["error_pct"]) for r in self.residuals]
        clipped = {"resamples_at_bound": self.resamples_at_bound} if self.resamples_at_bound else {}
        return {
            "params": self.params,
            "stderr": self.stderr,
            **clipped,
            "median_abs_error_pct": round(float(np.median(errors)), 2),
            "residuals": self.residuals,
        }


Predictor = Callable[[dict[str, float], GroupKey], float]
# a group's metric (the trace column it times) and point (what its rows measured)
Describe = Callable[[GroupKey], tuple[str, str]]


class PredictionOverflow(ValueError):
    """A group's prediction overflows a float: a count or size of its traces is far out of
    any physical range (a batch of 1e300 was an OverflowError traceback of the fit; the
    readers now refuse a batch past ``MAX_BATCH`` and tokens past ``MAX_TOKENS`` first)."""

    def __init__(self, section: str, where: str) -> None:
        super().__init__(
            f"{section} at {where}: the prediction overflows a float; a value of the trace "
            "is far out of any physical range"
        )
        self.section = section


def fit_groups(
    section: str,
    groups: Mapping[GroupKey, Sequence[float]],
    predict: Predictor,
    describe: Describe,
    bounds: Bounds,
    fixed: Mapping[str, float],
    bootstrap: int,
    rng: np.random.Generator,
    center: Callable[[np.ndarray], Any] = np.mean,
    point_of: Callable[[GroupKey], Hashable] = lambda key: key,
    on_solve: Callable[[], None] = lambda: None,
) -> ComponentFit:
    """Least squares on group means (or another ``center``: ``np.min`` for the fastest
    rep), then a bootstrap over the reps of each group; a residual names its group's metric
    and point (``describe``; the readers refuse a time of 0 ms or less, which a log error
    cannot take). ``TooFewPoints`` when the groups are too few distinct points for the
    free parameters (``point_of``: the configuration measured that a group's key is one
    metric or phase of; by default the key itself). ``on_solve`` is called after each of the 1 +
    ``bootstrap`` solves (progress). The parameters at a bound after the fit are
    ``at_bound``, and the share of the resamples a bound stopped ``resamples_at_bound``."""
    names = [n for n in bounds if n not in fixed]
    keys = list(groups)
    check_enough_points(section, len({point_of(k) for k in keys}), names)

    def solve(means: Mapping[GroupKey, float]) -> dict[str, float]:
        def residuals(x: np.ndarray) -> list[float]:
            params = {**fixed, **dict(zip(names, map(float, x), strict=True))}
            return [
                math.log(max(_predicted(section, predict, describe, params, k), 1e-12) / means[k])
                for k in keys
            ]

        start = [bounds[n][2] for n in names]
        limits = ([bounds[n][0] for n in names], [bounds[n][1] for n in names])
        result = least_squares(
            residuals, start, bounds=limits, x_scale="jac", loss="soft_l1", f_scale=0.1
        )
        on_solve()
        return {**fixed, **{n: float(v) for n, v in zip(names, result.x, strict=True)}}

    means = {k: float(center(np.asarray(groups[k]))) for k in keys}
    params = solve(means)
    limits = {n: bounds[n][:2] for n in names}
    samples, reached = [], []
    for _ in range(bootstrap):
        resampled = {
            k: float(center(rng.choice(np.asarray(groups[k]), len(groups[k])))) for k in keys
        }
        solved = solve(resampled)
        samples.append({n: round(v, 6) for n, v in solved.items()})
        reached.append(bounds_reached({n: solved[n] for n in names}, limits))
    stderr = {n: round(float(np.std([s[n] for s in samples])), 6) for n in names} if samples else {}
    residuals = []
    for k in keys:
        metric, point = describe(k)
        predicted = predict(params, k)
        residuals.append(
            {
                "point": point,
                "metric": metric,
                "measured": round(means[k], 4),
                "predicted": round(predicted, 4),
                "error_pct": round(relative_pct(predicted, means[k]), 2),
            }
        )
    rounded = {n: round(v, 6) for n, v in params.items()}
    at_bound = bounds_reached({n: params[n] for n in names}, limits)
    return ComponentFit(
        section, rounded, stderr, samples, residuals, at_bound, resample_shares(reached)
    )


def blas_kernel() -> str:
    """The BLAS kernels this process runs (OpenBLAS's core name, e.g. ``openblas
    SkylakeX``). A least-squares fit's last digits depend on them, and so does where it
    stops along a direction the traces leave flat (docs/calibration.md)."""
    kernels = {
        f"{lib['internal_api']} {lib.get('architecture') or 'unknown'}"
        for lib in threadpool_info()
        if lib["user_api"] == "blas"
    }
    return ", ".join(sorted(kernels)) or "unknown"


def _predicted(
    section: str, predict: Predictor, describe: Describe, params: dict[str, float], key: GroupKey
) -> float:
    """``predict(params, key)``; one that overflows a float is a ``PredictionOverflow``."""
    try:
        value = predict(params, key)
    except OverflowError:  # an int count past a float's range
        raise PredictionOverflow(section, _where(describe, key)) from None
    if math.isinf(value):
        raise PredictionOverflow(section, _where(describe, key))
    return value


def without_metric(key: GroupKey) -> GroupKey:
    """The configuration measured of a group whose key starts with the metric it times
    (``("d2h_ms", ...)``, ``("ttft_ms", ...)``): the rest of the key."""
    return key[1:]


def _where(describe: Describe, key: GroupKey) -> str:
    """A group in an error: ``vit_full, batch 8, 197 tokens (latency_ms)``."""
    metric, point = describe(key)
    return f"{point} ({metric})"
