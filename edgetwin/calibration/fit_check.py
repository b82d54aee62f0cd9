"""Whether a fitted profile describes the data it was fitted to: a section that misses its
own measurements by more than half (median |error|) was fitted to timings that disagree
with each other or with the twin's model, and predicts nothing with it."""

from __future__ import annotations

from edgetwin.profile import DeviceProfile

POOR_FIT_PCT = 50.0  # in-sample median |error| above which a section is named


class PoorFitWarning(UserWarning):
    """``edgetwin.calibrate`` fitted a profile that misses its own measurements."""


def poorly_fitted(profile: DeviceProfile) -> dict[str, float]:
    """The fitted sections whose in-sample median |error| (%) is above ``POOR_FIT_PCT``."""
    medians = profile.fit.get("median_abs_error_pct", {})
    return {name: float(pct) for name, pct in medians.items() if float(pct) > POOR_FIT_PCT}


def poor_fit_warning(profile: DeviceProfile, cause: str) -> str | None:
    """One line naming the poorly fitted sections and ``cause`` (the likely reason and what
    to do), or None when every section fits its own data."""
    poor = poorly_fitted(profile)
    if not poor:
        return None
    named = ", ".join(f"{name} {pct:.1f} %" for name, pct in poor.items())
    return (
        f"the fitted profile misses its own measurements by more than {POOR_FIT_PCT:g} % "
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
