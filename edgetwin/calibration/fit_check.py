"""Whether a fitted profile describes the data it was fitted to: a section that misses its
own measurements by more than half (median |error|) was fitted to timings that disagree
with each other or with the twin's model, and predicts nothing with it; one fitted from
fewer distinct points than parameters matches any data, and is not fitted at all; a
parameter left at a bound of its fit was stopped there by the bound, not by the data, and
one left where its fit started, no measurement changing with it, is not fitted either; a
fitted metric its held-out refits give no errors for has no prediction interval."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from edgetwin.errors import InputError, shown
from edgetwin.number_text import exact_text, figure_text
from edgetwin.profile import DeviceProfile
from edgetwin.results import INTERVAL_METRICS
from edgetwin.sim.intervals import (
    MIN_RESIDUALS,
    NOT_KNOWN_FACTOR,
    SECTION_OF_METRIC,
    held_out_residuals,
)

POOR_FIT_PCT = 50.0  # in-sample median |error| above which a section is named
# a fitted value within this share of its bounds' range of one of them is at that bound
AT_BOUND_SHARE = 1e-6


class PoorFitWarning(UserWarning):
    """``edgetwin.calibrate`` fitted a profile that misses its own measurements."""


def median_errors(profile: DeviceProfile) -> str:
    """What a fitted profile's ``wrote`` line says of its fit (``calibrate``,
    ``calibrate-machine`` and ``--emu`` alike): each fitted section's in-sample median
    |error| as the profile keeps it (``fit.median_abs_error_pct``, not rounded again: 0.25
    said 0.2 beside a report's 0.3), ``in-sample median |error|: compute 4.06 %, staging
    8.94 %``."""
    medians = profile.fit.get("median_abs_error_pct", {})
    errors = ", ".join(f"{name} {figure_text(float(pct))} %" for name, pct in medians.items())
    return f"in-sample median |error|: {errors or 'no fit'}"


def fit_of(profile: DeviceProfile) -> dict[str, Any]:
    """``profile.fit``; anything but a DeviceProfile (a profile file's path, the list an
    Android spec's calibrate returns) is an InputError naming the argument ``profile``."""
    if not isinstance(profile, DeviceProfile):
        problem = f"a DeviceProfile (what edgetwin.calibrate returns), not {shown(profile)}"
        raise InputError(None, "profile", problem)
    return profile.fit


def poorly_fitted(profile: DeviceProfile) -> dict[str, float]:
    """The fitted sections whose in-sample median |error| (%) is above ``POOR_FIT_PCT``."""
    medians = fit_of(profile).get("median_abs_error_pct", {})
    return {name: float(pct) for name, pct in medians.items() if float(pct) > POOR_FIT_PCT}


def poor_fit_warning(profile: DeviceProfile, cause: str) -> str | None:
    """One line naming the poorly fitted sections and ``cause`` (the likely reason and what
    to do), or None when every section fits its own data."""
    poor = poorly_fitted(profile)
    if not poor:
        return None
    named = ", ".join(f"{name} {figure_text(pct)} %" for name, pct in poor.items())
    return (
        f"the fitted profile misses its own measurements by more than {exact_text(POOR_FIT_PCT)} % "
        f"(median |error|: {named}); {cause}"
    )


def busy_machine_cause(load_average: float, cores: int) -> str:
    """Why this machine's own timings disagree, when they do: other work on its cores."""
    return (
        f"this machine's timings were uneven. Other work on its cores (load average "
        f"{load_average:.1f} on {cores} cores before measuring) holds back one of torch's "
        "threads, and the others wait for it (a 2 ms forward took up to 190 ms on a 2-core "
        "VM with one core busy): run it again when the machine is quiet"
    )


TRACES_CAUSE = (
    "its measurements disagree with each other or with the twin's model: check that they "
    "were taken on a quiet machine, in the units the trace format names (docs/traces.md)"
)


MIN_POINTS = 2  # through one point, any law with a free parameter passes exactly


class TooFewPoints(ValueError):
    """A section fitted from fewer distinct measured points than it has free parameters, or
    from one: the fit would match them whatever the model, and report 0.0 % as its error.
    A point is a distinct configuration measured (a trace row's shape, a table's row),
    whatever metrics or phases it times; repetitions of it are one point."""

    def __init__(self, section: str, points: int, parameters: Sequence[str]) -> None:
        self.section = section
        self.points = points
        self.parameters = tuple(parameters)
        super().__init__(self.problem)

    @property
    def problem(self) -> str:
        """What is wrong and what to do, for an error naming the file the points are in."""
        count = len(self.parameters)
        points = f"{self.points} distinct point{'' if self.points == 1 else 's'}"
        return (
            f"{points} for the {self.section} fit's {count} free parameter"
            f"{'' if count == 1 else 's'} ({', '.join(self.parameters)}): it needs at least "
            f"{max(count, MIN_POINTS)}, or it matches any data (error 0.0 %); measure more "
            "batch sizes or shapes, or set some of them in the spec's fixed"
        )


def check_enough_points(section: str, points: int, parameters: Sequence[str]) -> None:
    """``TooFewPoints`` unless ``points`` distinct measured points can fit ``parameters``
    (at least as many, and ``MIN_POINTS``); a section with nothing to fit passes."""
    if parameters and points < max(len(parameters), MIN_POINTS):
        raise TooFewPoints(section, points, parameters)


class AtBoundWarning(UserWarning):
    """``edgetwin.calibrate`` fitted a parameter that a bound of its fit stopped."""


BoundReached = tuple[str, float]  # ("lower" or "upper", the bound)


def bounds_reached(
    values: Mapping[str, float], bounds: Mapping[str, tuple[float, float]]
) -> dict[str, BoundReached]:
    """The parameters of ``values`` at one of their ``bounds`` (lower, upper) of a least
    squares fit, within ``AT_BOUND_SHARE`` of the range: name -> (side, bound)."""
    reached: dict[str, BoundReached] = {}
    for name, value in values.items():
        lower, upper = bounds[name]
        near = AT_BOUND_SHARE * (upper - lower)
        if value - lower <= near:
            reached[name] = ("lower", lower)
        elif upper - value <= near:
            reached[name] = ("upper", upper)
    return reached


def resample_shares(
    reached: Sequence[Mapping[str, BoundReached]],
) -> dict[str, dict[str, float]]:
    """Per parameter and side, the share of a bootstrap's resamples (``bounds_reached`` of
    each) that a bound stopped: there the parameter's spread, and the intervals drawn
    from its samples, are cut. Only the parameters some resample put at a bound."""
    shares: dict[str, dict[str, float]] = {}
    for resample in reached:
        for name, (side, _bound) in resample.items():
            sides = shares.setdefault(name, {})
            sides[side] = sides.get(side, 0.0) + 1.0
    return {
        name: {side: round(count / len(reached), 3) for side, count in sides.items()}
        for name, sides in shares.items()
    }


def bound_record(parameter: str, value: float, reached: BoundReached, fit: str) -> dict[str, Any]:
    """What a profile's ``fit.at_bound`` keeps of a parameter at a bound: its
    ``section.name``, its value, which bound and the fit it came from."""
    side, bound = reached
    return {"parameter": parameter, "value": value, "side": side, "bound": bound, "fit": fit}


def at_bound_block(records: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """``{"at_bound": records}`` to add to a profile's ``fit``; nothing when there are none
    (a profile without the key has no parameter at a bound)."""
    kept = [dict(record) for record in records]
    return {"at_bound": kept} if kept else {}


def at_bound(profile: DeviceProfile) -> list[dict[str, Any]]:
    """The fitted parameters of ``profile`` that a bound of their fit stopped
    (``fit.at_bound``)."""
    records: list[dict[str, Any]] = fit_of(profile).get("at_bound", [])
    return records


def with_at_bound(profile: DeviceProfile, records: Sequence[Mapping[str, Any]]) -> DeviceProfile:
    """``profile`` with ``records`` (``fit_check.bound_record``) added to its ``fit.at_bound``."""
    kept = [*at_bound(profile), *records]
    return profile.model_copy(update={"fit": {**profile.fit, **at_bound_block(kept)}})


def at_bound_warnings(profile: DeviceProfile) -> list[str]:
    """One line per parameter of ``profile`` at a bound of its fit: its value, the bound,
    the fit, and what that says."""
    return [
        f"{r['parameter']} = {figure_text(r['value'])} is at its {r['side']} bound "
        f"({exact_text(r['bound'])}) in "
        f"the {r['fit']} fit: the bound stopped it, not the data. The data does not pin it, "
        "or the twin's model lacks a cause the data shows (fit.at_bound; a value you know "
        "goes in the spec's fixed)"
        for r in at_bound(profile)
    ]


class NotPinnedWarning(UserWarning):
    """``edgetwin.calibrate`` left a parameter where its fit started: no measurement
    changes with it."""


def not_pinned_record(parameter: str, value: float, fit: str) -> dict[str, Any]:
    """What a profile's ``fit.not_pinned`` keeps of a parameter the data does not pin: its
    ``section.name``, the value it kept (the fit's start) and the fit it came from."""
    return {"parameter": parameter, "value": value, "fit": fit}


def not_pinned(profile: DeviceProfile) -> list[dict[str, Any]]:
    """The parameters of ``profile`` that no measurement of their fit changed with, left
    at the fit's start (``fit.not_pinned``)."""
    records: list[dict[str, Any]] = profile.fit.get("not_pinned", [])
    return records


def with_not_pinned(profile: DeviceProfile, records: Sequence[Mapping[str, Any]]) -> DeviceProfile:
    """``profile`` with ``records`` (``not_pinned_record``) added to its ``fit.not_pinned``
    (no key where there are none)."""
    kept = not_pinned_block([*not_pinned(profile), *records])
    return profile.model_copy(update={"fit": {**profile.fit, **kept}})


def not_pinned_block(records: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """``{"not_pinned": records}`` to add to a profile's ``fit``; nothing when there are
    none."""
    kept = [dict(record) for record in records]
    return {"not_pinned": kept} if kept else {}


def not_pinned_warnings(profile: DeviceProfile) -> list[str]:
    """One line per parameter of ``profile`` that its data does not pin: its value, the
    fit, and what to do."""
    return [
        f"{r['parameter']} = {exact_text(r['value'])} is where the {r['fit']} fit started: no "
        "measured row changes with it, so the data does not pin it (a host time a slower GPU "
        "always outlasts, say) and the profile keeps the start (fit.not_pinned; a value you "
        "know goes in the spec's fixed)"
        for r in not_pinned(profile)
    ]


# what a held-out refit's warning says where the rest of the data has points, but fewer
# than the section's parameters (else it had none: the section's data was at that value)
TOO_FEW_LEFT = "too few"


class NoHeldOutWarning(UserWarning):
    """``edgetwin.calibrate`` fitted a profile whose held-out refits give a fitted metric no
    errors: the twin's prediction interval for it is the not-known band."""


def not_held_out(profile: DeviceProfile) -> list[str]:
    """The twin metrics the fit fitted (``fit.median_abs_error_pct``: a table's metrics, a
    trace fit's sections) that its held-out refits (``fit.held_out``) left with too few
    residuals for a band (``sim.intervals``); none for a fit that makes no refits (an
    emulator run's)."""
    fit = fit_of(profile)
    if "held_out" not in fit:
        return []
    metric_of = {section: metric for metric, section in SECTION_OF_METRIC.items()}
    fitted = {metric_of.get(name, name) for name in fit.get("median_abs_error_pct", {})}
    return [
        metric
        for metric in INTERVAL_METRICS
        if metric in fitted and len(held_out_residuals(profile, metric)) < MIN_RESIDUALS
    ]


def not_held_out_warning(profile: DeviceProfile) -> str | None:
    """One line naming the fitted metrics without held-out errors, what that leaves the
    twin's intervals and what to measure; None when every one has them."""
    metrics = not_held_out(profile)
    if not metrics:
        return None
    them = "it" if len(metrics) == 1 else "them"
    factor = f"{exact_text(NOT_KNOWN_FACTOR)}"
    skipped = skipped_refits(profile)
    why = (
        "without some batch size too few distinct points were left to refit a section (the "
        "validation warnings say which): measure more batch sizes or shapes, or set some of "
        "its parameters in the spec's fixed, and fit again"
        if any(TOO_FEW_LEFT in line for line in skipped)
        else "no refit had data left to fit (the validation warnings say which): measure a "
        "second batch size and fit again"
        if skipped
        else "the refits made no points for it: a metric's held-out points need every "
        "section it is predicted from refitted (an exchange's comm: staging and network), none "
        "taken from a base profile"
    )
    return (
        f"the profile has no held-out errors for {', '.join(metrics)} (fit.held_out): a "
        f"twin run with intervals gives {them} the not-known band, [m / {factor}, m x "
        f"{factor}]. Held-out errors come from refits that leave out each batch size and "
        f"predict it from the others, and {why}"
    )


class SkippedRefitWarning(UserWarning):
    """``edgetwin.calibrate``'s held-out refits (``fit.held_out``) left a held-out value a
    section too few points to refit, so it gives that section no held-out points."""


def skipped_refits(profile: DeviceProfile) -> list[str]:
    """The warnings of the held-out refits of ``profile`` (``fit.held_out.warnings``), as
    ``validate`` gives them: ``validation: batch 8 gives no held-out exchange points: ...``."""
    warnings: list[str] = profile.fit.get("held_out", {}).get("warnings", [])
    return warnings


class UnitWarning(UserWarning):
    """``edgetwin.calibrate`` read a trace column whose times no device takes (values 1000x
    too large: microseconds, by the look of them, in a column read in ms)."""


def slow_columns(profile: DeviceProfile) -> list[str]:
    """The trace columns of ``profile``'s fit slower than any device (``fit.slow_columns``,
    ``calibration.unit_check``): ``FILE: field 'COLUMN': ...``."""
    lines: list[str] = profile.fit.get("slow_columns", [])
    return lines


FitWarning = tuple[type[UserWarning], str]  # a warning of a fit: its category and its line
FIT_WARNINGS = (
    UnitWarning,
    PoorFitWarning,
    AtBoundWarning,
    NotPinnedWarning,
    SkippedRefitWarning,
    NoHeldOutWarning,
)


def fit_warnings(profile: DeviceProfile, cause: str | None = None) -> list[FitWarning]:
    """Every warning of a fitted profile, in the order ``edgetwin calibrate`` prints them:
    a ``UnitWarning`` for each trace column slower than any device (the likely cause of
    those after it), a ``PoorFitWarning`` when a fitted section misses its own data
    (``cause``: why, when known; by default that the measurements disagree), an
    ``AtBoundWarning`` for each parameter a bound of its fit stopped, a ``NotPinnedWarning``
    for each that no measurement changes with, a ``SkippedRefitWarning`` for each section a
    held-out refit could not refit, and a ``NoHeldOutWarning`` when its held-out refits
    give a fitted metric no errors. The API warns them, the commands print them."""
    found: list[FitWarning] = [(UnitWarning, line) for line in slow_columns(profile)]
    poor = poor_fit_warning(profile, cause or TRACES_CAUSE)
    if poor is not None:
        found.append((PoorFitWarning, poor))
    found += [(AtBoundWarning, line) for line in at_bound_warnings(profile)]
    found += [(NotPinnedWarning, line) for line in not_pinned_warnings(profile)]
    found += [(SkippedRefitWarning, line) for line in skipped_refits(profile)]
    no_held_out = not_held_out_warning(profile)
    if no_held_out is not None:
        found.append((NoHeldOutWarning, no_held_out))
    return found
