"""The solved parameters of an Android calibration: the phone classes' spread of load
times (z-scores), and the load scale, WiFi share and power scale at which the twin's runs
match the published means (brentq on the twin)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from statistics import fmean

from scipy.optimize import brentq

from edgetwin.calibration.android_inputs import AndroidSpec
from edgetwin.calibration.android_twin import broadcast_load_s, device_mean_loads_s, run_once
from edgetwin.calibration.session_load import SessionLoadFit
from edgetwin.number_text import exact_text, figure_text
from edgetwin.phone_profile import MMAP_CEILING_MB, PhoneProfile
from edgetwin.scenario import Scenario

STATES = ("idle", "inference", "load", "transfer")


def class_z_scores(counts: list[int]) -> list[float]:
    """Equally spaced scores, slowest first, of weighted mean 0 and variance 1."""
    positions = [-float(k) for k in range(len(counts))]
    total = sum(counts)
    mean = sum(n * x for n, x in zip(counts, positions, strict=True)) / total
    var = sum(n * (x - mean) ** 2 for n, x in zip(counts, positions, strict=True)) / total
    if var == 0:
        return [0.0 for _ in counts]
    return [(x - mean) / math.sqrt(var) for x in positions]


class Fitter:
    """Builds candidate profiles and runs the twin on them."""

    def __init__(
        self, spec: AndroidSpec, scenario: Scenario, machine: SessionLoadFit, slowdown: list[float]
    ) -> None:
        self.spec = spec
        self.scenario = scenario
        self.machine = machine  # this machine's load model
        self.slowdown = slowdown  # per class: how much slower than this machine
        self.load_scale = 1.0  # on every class, so the twin's schedule gives the published mean

    def profiles(
        self, efficiency: float, power_w: dict[str, float], load_cv: float
    ) -> list[PhoneProfile]:
        a = self.spec.assumptions
        return [
            PhoneProfile.model_validate(
                {
                    "name": facts.name,
                    "description": facts.description,
                    "ram_mb": facts.ram_mb,
                    "os_reserved_mb": a.os_reserved_mb,
                    "cpu_gflops": facts.cpu_gflops,
                    "inference_floor_ms": a.inference_floor_ms,
                    "has_gpu": facts.has_gpu,
                    "cache_mb": a.cache_mb,
                    "session": {**session, "load_cv": round_fitted(load_cv)},
                    "network": {
                        "message_overhead_ms": a.message_overhead_ms,
                        "bandwidth_efficiency": round_fitted(efficiency),
                    },
                    "battery": {"capacity_mah": facts.battery_mah, "voltage_v": a.voltage_v},
                    "power": {f"{s}_w": round_fitted(power_w[s]) for s in STATES},
                }
            )
            for facts, session in zip(self.spec.phone_classes, self._sessions(), strict=True)
        ]

    def relative_power(self) -> dict[str, float]:
        return self.spec.assumptions.relative_power.model_dump()

    def _sessions(self) -> list[dict[str, float]]:
        return [_session(self.machine, k * self.load_scale) for k in self.slowdown]

    def solve_load_scale(self, warm_mean_s: float, load_cv: float) -> float:
        """The factor on every class's loads at which the twin's per-device mean warm load
        over the scenario's streaming runs (the loads its schedule makes, noise on) is
        ``warm_mean_s``."""

        def gap(scale: float) -> float:
            self.load_scale = scale
            profiles = self.profiles(1.0, self.relative_power(), load_cv)
            outcomes = [
                run_once(self.scenario, profiles, self.spec, "warm", True, rep=rep)
                for rep in range(self.scenario.repetitions)
            ]
            means = [d for o in outcomes for d in device_mean_loads_s(o)]
            if not means:  # every load outlasted the runs: none to compare
                raise ValueError(
                    f"at a load scale of {exact_text(scale)} the scenario's runs finish no warm "
                    "load to "
                    f"compare with the measured {exact_text(warm_mean_s)} s (warm_load): check "
                    "that figure"
                )
            return fmean(means) - warm_mean_s

        return _root(gap, 0.1, 10.0, 1e-6, "load scale", "per-device mean warm load (warm_load)")

    def solve_efficiency(self, cold_mean_s: float) -> float:
        """WiFi share at which the cold broadcast of the first stage takes ``cold_mean_s``."""

        def gap(efficiency: float) -> float:
            profiles = self.profiles(efficiency, self.relative_power(), load_cv=0.0)
            outcome = run_once(self.scenario, profiles, self.spec, "cold", noise=False)
            return broadcast_load_s(outcome) - cold_mean_s

        low, high = 0.01, 2.0
        gap = functools.cache(gap)  # each share is run once (its end points: twice before)
        if gap(high) > 0:
            return high
        return _root(gap, low, high, 1e-9, "WiFi share", "cold broadcast load (cold_load)")

    def solve_power(self, efficiency: float, battery_mah: float) -> dict[str, float]:
        """Watts per state: the relative powers scaled to the published battery per run."""
        relative = self.relative_power()
        profiles = self.profiles(efficiency, relative, load_cv=0.0)
        outcome = run_once(self.scenario, profiles, self.spec, "cold", noise=False)
        predicted = outcome.rows[0].battery_mah or math.nan
        scale = battery_mah / predicted
        return {state: w * scale for state, w in relative.items()}


def _root(
    gap: Callable[[float], float], low: float, high: float, xtol: float, solved: str, matched: str
) -> float:
    """The ``solved`` value in [``low``, ``high``] at which ``gap`` (the twin's ``matched``
    less the measured one, in s) is 0; a ValueError in the fit's words when ``gap`` has one
    sign at both ends, so no value in between matches (SciPy's brentq said "f(a) and f(b)
    must have different signs")."""
    gap = functools.cache(gap)
    at_low, at_high = gap(low), gap(high)
    if at_low * at_high > 0:
        side = "longer" if at_low > 0 else "shorter"
        closest = min(abs(at_low), abs(at_high))
        raise ValueError(
            f"no {solved} from {exact_text(low)} to {exact_text(high)} makes the twin's {matched} "
            "the measured "
            f"one: it stays {side} (by {figure_text(closest)} s at the closest); check that figure"
        )
    return float(brentq(gap, low, high, xtol=xtol))


def _session(machine: SessionLoadFit, slowdown: float) -> dict[str, float]:
    """A phone class's session parameters: this machine's load model ``slowdown`` times."""
    return {
        "floor_s": round_fitted(machine.floor_ms * slowdown / 1e3),
        "s_per_mb": round_fitted(machine.ms_per_mb * slowdown / 1e3),
        "s_per_mapped_mb": round_fitted(machine.ms_per_mapped_mb * slowdown / 1e3),
        "mapped_above_mb": round_fitted(MMAP_CEILING_MB),
    }


def round_fitted(value: float) -> float:
    """A fitted figure as the profiles record it: 6 significant digits."""
    return float(f"{value:.6g}")
