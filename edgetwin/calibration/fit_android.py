"""Fit Android phone profiles to the published CROWDio measurements.

The reference gives per-device mean +- std over five heterogeneous phones
and ten runs. The fit is written down in the spec (its distinguishing key is
``phone_classes``) and here:

1. Warm load (session creation from storage). Its shape over the stages is
   measured: the real worker's warm loads on this machine
   (``calibration.session_load``) fit ``floor + ms_per_mb x size`` (+ a term
   for files the allocator maps fresh); a phone
   class is that machine slower by one factor (every part of a load, reading,
   hashing, deserialising, is CPU and memory work). The published figure is a
   per-device mean over the pipeline's stages (each phone loads each stage
   once in a streaming run) +- its std over phones and runs, split into
   run-to-run noise and differences between phones. Noise is a coefficient of
   variation per load; a streaming chain has the S loads in series, so the
   published run-to-run std of the latency gives it: cv = latency_std /
   sqrt(sum_s t_s^2) (t_s: each stage's load at the published mean), and the
   noise of a per-device mean is latency_std / S. The rest, sigma_dev =
   sqrt(std^2 - (latency_std / S)^2), is spread over the classes (slowest
   first in the spec, counts from the scenario's fleet) at equally spaced
   z-scores of mean 0 and variance 1. Phones do not load each stage once
   (the schedule decides), so one factor on every class is solved (brentq)
   so that the twin's per-device mean warm load over the scenario's
   streaming runs is the published mean.
2. Cold load = downloading the partition over the shared WiFi, then the warm
   load. The published figure is read as the eager broadcast of the first
   stage (every phone downloads it at once); the phones' achieved share of
   the WiFi rate is solved (brentq) so that the twin's broadcast loads of a
   cold run average the published mean.
3. Power: relative watts per state are an assumption of the spec; one scale
   is solved so that the twin's mean mAh per phone over a cold run matches
   the published battery per run.

The pipeline latency itself is never fitted: streaming and barrier latencies
come out of the twin and are reported next to the published figures.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean, pstdev
from typing import Annotated, Any

from pydantic import Field, ValidationError
from scipy.optimize import brentq

from edgetwin.atomic import output_kind
from edgetwin.calibration.profile_io import source_record, write_profiles
from edgetwin.calibration.session_load import (
    SessionLoadFit,
    fit_session_load,
    read_session_loads,
)
from edgetwin.configuration import CrowdRun
from edgetwin.crowd_fleet import PhoneClass
from edgetwin.csv_rows import read_rows
from edgetwin.errors import InputError, shown
from edgetwin.models.strategies.crowdio import CROWDIO_BARRIER, CROWDIO_STREAMING
from edgetwin.phone_profile import MMAP_CEILING_MB, PhoneProfile
from edgetwin.profile import mah_from_joules
from edgetwin.scenario import Scenario, load_scenario
from edgetwin.schema import (
    FileName,
    PositiveFloat,
    Strict,
    load_yaml_model,
    read_yaml_mapping,
    referenced_file,
)
from edgetwin.sim.crowd.costs import compressed_activation_bytes
from edgetwin.sim.crowd.runner import CrowdOutcome, CrowdSetup, simulate_crowd

SPEC_KEY = "phone_classes"  # an Android calibration spec has this key, a Jetson one does not
STATES = ("idle", "inference", "load", "transfer")
# the metrics the fit reads and the unit each is given in (a latency in ms read as s, or a
# mean of 0, made the fit divide by zero or find no root: tracebacks)
METRIC_UNITS = {
    "pipeline_latency_streaming": "s",
    "cold_load": "s",
    "warm_load": "s",
    "peak_rss": "MB",
    "battery_per_run": "mAh",
    "activation_compression": "pct",
}


class PhoneClassFacts(Strict):
    """What is known or assumed about one class of phone, not fitted."""

    name: FileName  # its profile is written as <name>.yaml
    description: str = ""
    ram_mb: PositiveFloat
    cpu_gflops: PositiveFloat
    battery_mah: PositiveFloat
    has_gpu: bool = False


_Finite = Annotated[float, Field(ge=0, allow_inf_nan=False)]  # a time or a power, >= 0


class RelativePower(Strict):
    """Power of each state relative to inference (the fit solves the scale)."""

    idle: _Finite
    inference: Annotated[float, Field(gt=0, allow_inf_nan=False)]  # the unit of the others
    load: _Finite
    transfer: _Finite


class Assumptions(Strict):
    os_reserved_mb: PositiveFloat
    voltage_v: PositiveFloat
    inference_floor_ms: _Finite
    message_overhead_ms: _Finite
    cache_mb: PositiveFloat
    relative_power: RelativePower


class AndroidSpec(Strict):
    """An Android calibration job: the reference, the scenario, the classes, the assumptions."""

    reference: str
    scenario: str
    session_loads: str  # warm loads measured on this machine (calibration.session_load)
    phone_classes: tuple[PhoneClassFacts, ...]  # slowest session creation first
    assumptions: Assumptions


@dataclass(frozen=True)
class Measure:
    mean: float
    std: float
    unit: str


def is_android_spec(path: Path) -> bool:
    """Whether ``path`` is an Android spec (for ``edgetwin calibrate`` to route it)."""
    return SPEC_KEY in read_yaml_mapping(path)


def load_android_spec(path: Path) -> AndroidSpec:
    return load_yaml_model(path, AndroidSpec)


def read_reference(path: Path) -> dict[str, Measure]:
    """``metric,mean,std,unit`` rows; a bad cell names the file, its column and the line:
    a mean must be above 0, a read metric in its ``METRIC_UNITS`` unit and on one row (a
    second row of it, in the same unit or not, had silently replaced the first)."""
    if not path.is_file():
        raise InputError(path, None, "file not found")
    measures = {}
    lines: dict[str, int] = {}
    for row in read_rows(path, ("metric", "mean", "std", "unit")):
        metric, unit = row.text("metric"), row.optional_text("unit") or ""
        if metric in lines:
            raise row.error("metric", f"{metric} is given again (first on line {lines[metric]})")
        lines[metric] = row.line
        wanted = METRIC_UNITS.get(metric)
        if wanted is not None and unit != wanted:
            raise row.error("unit", f"{unit!r}: {metric} is read in {wanted}")
        measures[metric] = Measure(row.positive("mean"), row.number("std", minimum=0.0), unit)
    missing = [m for m in METRIC_UNITS if m not in measures]
    if missing:
        raise InputError(path, None, f"missing metrics: {', '.join(missing)}")
    return measures


def fit_android_profiles(
    spec_path: Path,
    command: str = "edgetwin calibrate edgetwin/calibration/specs/android_crowdio.yaml "
    "--out edgetwin/calibration/profiles",
) -> list[PhoneProfile]:
    """Fit one profile per phone class; each records the fit, its sources and ``command``."""
    spec = load_android_spec(spec_path)
    base = spec_path.parent
    reference_path = referenced_file(spec.reference, base, spec_path, "reference").resolve()
    scenario_path = referenced_file(spec.scenario, base, spec_path, "scenario").resolve()
    reference = read_reference(reference_path)
    scenario = load_scenario(scenario_path)
    counts = _class_counts(spec, scenario, scenario_path)
    loads_path = referenced_file(spec.session_loads, base, spec_path, "session_loads").resolve()
    measured = read_session_loads(loads_path)
    try:  # measurements no profile fits (a load of 6,000 s, a latency std of 1,100 s)
        machine, with_nodes = fit_session_load(measured), fit_session_load(measured, per_node=True)
        warm, latency = reference["warm_load"], reference["pipeline_latency_streaming"]
        sizes_mb = [s.size_mb for s in _crowd(scenario).job.stages]
        machine_mean_ms = fmean(machine.predict_ms(size) for size in sizes_mb)
        shape = [machine.predict_ms(size) / machine_mean_ms for size in sizes_mb]
        load_cv = latency.std / (warm.mean * math.sqrt(sum(x * x for x in shape)))
        sigma_run = min(warm.std, latency.std / len(sizes_mb))  # of a per-device mean
        sigma_dev = math.sqrt(warm.std**2 - sigma_run**2)
        z_scores = _z_scores(counts)
        class_mean_s = [warm.mean + z * sigma_dev for z in z_scores]
        slowdown = [1e3 * mean_s / machine_mean_ms for mean_s in class_mean_s]
        fitter = _Fitter(spec, scenario, machine, slowdown)
        fitter.load_scale = fitter.solve_load_scale(warm.mean, load_cv)
        efficiency = fitter.solve_efficiency(reference["cold_load"].mean)
        power_w = fitter.solve_power(efficiency, reference["battery_per_run"].mean)
        profiles = fitter.profiles(efficiency, power_w, load_cv=load_cv)
    except (ValueError, ArithmeticError) as exc:  # a solver's, or a profile's own check
        if isinstance(exc, ValidationError):  # the fitted profile's own check
            first = exc.errors()[0]
            reason = f"its {'.'.join(map(str, first['loc']))}: {first['msg']}"
        else:
            reason = str(exc).splitlines()[0]
        measured_in = f"{reference_path.name} and {loads_path.name}"
        raise InputError(
            spec_path, None, f"no phone profile fits {measured_in}: {reason}"
        ) from None
    stage_names = [s.name for s in _crowd(scenario).job.stages]
    derived = {
        "machine_session_load": _fit_record(machine),
        "machine_session_load_with_nodes": _fit_record(with_nodes),
        "stage_load_shape": dict(zip(stage_names, map(_round, shape), strict=True)),
        "slowdown_vs_machine": [_round(k * fitter.load_scale) for k in slowdown],
        "class_mean_load_s": [round(m * fitter.load_scale, 4) for m in class_mean_s],
        "load_scale_for_schedule": _round(fitter.load_scale),
        "sigma_run_s": {
            name: round(load_cv * warm.mean * fitter.load_scale * x, 4)
            for name, x in zip(stage_names, shape, strict=True)
        },
        "sigma_between_phones_s": {
            name: round(sigma_dev * fitter.load_scale * x, 4)
            for name, x in zip(stage_names, shape, strict=True)
        },
        "sigma_run_of_device_mean_s": round(sigma_run, 4),
        "sigma_between_phones_of_device_mean_s": round(sigma_dev, 4),
        "z_scores": [round(z, 4) for z in z_scores],
        "phones_per_class": counts,
        "wifi_share_efficiency": round(efficiency, 6),
        "power_w": {state: round(w, 4) for state, w in power_w.items()},
    }
    fit = {
        "method": "warm load per stage: this machine's measured floor + ms per MB (+ per "
        "mapped MB), slowed by one factor per phone class; the per-device mean split into "
        "phone classes and run noise (cv from the latency std over the S loads in series), "
        "its mean solved on the twin's warm streaming runs; WiFi share solved on the twin's "
        "cold broadcast; one power scale solved on the twin's cold-run battery; latency not "
        "fitted",
        "assumptions": spec.assumptions.model_dump(),
        "derived": derived,
        "sources": [
            source_record(reference_path),
            source_record(scenario_path),
            source_record(loads_path),
        ],
        "command": command,
        "comparison": compare_to_reference(scenario, profiles, spec, reference),
    }
    return [p.model_copy(update={"fit": fit}) for p in profiles]


def write_android_profiles(
    profiles: Sequence[PhoneProfile], out_dir: Path, force: bool = False
) -> list[Path]:
    """Write ``out_dir/<name>.yaml`` for each profile, with a header naming the command (a
    class's file already there only with ``force``; the folder's other files stay)."""
    if output_kind(out_dir) not in (None, "folder"):
        raise InputError(
            out_dir,
            "--out",
            "exists and is not a folder (an Android spec writes one profile per phone class)",
        )
    by_path = {android_profile_path(out_dir, profile): profile for profile in profiles}
    write_profiles(by_path, force)  # all or none: never some classes new and some old
    return list(by_path)


def android_profile_path(out_dir: Path, profile: PhoneProfile) -> Path:
    """Where ``write_android_profiles`` puts a phone class's profile."""
    return out_dir / f"{profile.name}.yaml"


# ---------------------------------------------------------------- fitting


def _crowd(scenario: Scenario) -> Any:
    if scenario.crowd is None:
        raise InputError(None, "scenario", "the calibration scenario has no 'crowd' section")
    return scenario.crowd


def _class_counts(spec: AndroidSpec, scenario: Scenario, path: Path) -> list[int]:
    """Phones of each spec class in the scenario's fleet (matched by profile name)."""
    fleet = _crowd(scenario).fleet
    described = {c.name for c in spec.phone_classes}
    for phone in fleet:
        if phone.profile not in described:
            problem = f"the scenario's fleet uses {shown(phone.profile)}, not a class of the spec"
            raise InputError(path, "crowd.fleet", problem)
    counts = []
    for phone_class in spec.phone_classes:
        matched = [c.count or 0 for c in fleet if c.profile == phone_class.name]
        if not matched:
            raise InputError(path, "crowd.fleet", f"no phone class uses {phone_class.name!r}")
        counts.append(sum(matched))
    return counts


def _z_scores(counts: list[int]) -> list[float]:
    """Equally spaced scores, slowest first, of weighted mean 0 and variance 1."""
    positions = [-float(k) for k in range(len(counts))]
    total = sum(counts)
    mean = sum(n * x for n, x in zip(counts, positions, strict=True)) / total
    var = sum(n * (x - mean) ** 2 for n, x in zip(counts, positions, strict=True)) / total
    if var == 0:
        return [0.0 for _ in counts]
    return [(x - mean) / math.sqrt(var) for x in positions]


class _Fitter:
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
                    "session": {**session, "load_cv": _round(load_cv)},
                    "network": {
                        "message_overhead_ms": a.message_overhead_ms,
                        "bandwidth_efficiency": _round(efficiency),
                    },
                    "battery": {"capacity_mah": facts.battery_mah, "voltage_v": a.voltage_v},
                    "power": {f"{s}_w": _round(power_w[s]) for s in STATES},
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
                    f"at a load scale of {scale:g} the scenario's runs finish no warm load to "
                    f"compare with the measured {warm_mean_s:g} s (warm_load): check that figure"
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
            f"no {solved} from {low:g} to {high:g} makes the twin's {matched} the measured "
            f"one: it stays {side} (by {closest:.4g} s at the closest); check that figure"
        )
    return float(brentq(gap, low, high, xtol=xtol))


def _setup(profiles: list[PhoneProfile], spec: AndroidSpec, scenario: Scenario) -> CrowdSetup:
    by_name = {p.name: p for p in profiles}
    names = {facts.name for facts in spec.phone_classes}
    classes = [
        PhoneClass(c, by_name[c.profile]) for c in _crowd(scenario).fleet if c.profile in names
    ]
    return CrowdSetup(classes, {})


def run_once(
    scenario: Scenario,
    profiles: list[PhoneProfile],
    spec: AndroidSpec,
    cache: str,
    noise: bool,
    strategy: str = CROWDIO_STREAMING,
    rep: int = 0,
) -> CrowdOutcome:
    """One run of the calibration scenario with these profiles (recording on)."""
    crowd = _crowd(scenario).model_copy(update={"cache": cache})
    if not noise:
        profiles = [
            p.model_copy(update={"session": p.session.model_copy(update={"load_cv": 0.0})})
            for p in profiles
        ]
    variant = scenario.model_copy(
        update={"crowd": crowd, "noise_cv": scenario.noise_cv if noise else 0.0}
    )
    run = CrowdRun(strategy, crowd.schedulers[0], rep, scenario.network.bandwidth_mbps)
    return simulate_crowd(variant, _setup(profiles, spec, variant), run, record=True)


def broadcast_load_s(outcome: CrowdOutcome) -> float:
    """Mean duration of the first job's broadcast loads of the first stage."""
    durations = list(outcome.jobs[0].broadcast_load_ms.values())
    return fmean(durations) / 1e3


def warm_loads_s(outcome: CrowdOutcome) -> dict[tuple[str, str], list[float]]:
    """Every warm load of a run that finished, in seconds, by (phone, stage)."""
    loads: dict[tuple[str, str], list[float]] = {}
    for a in outcome.recorder.activities:
        if a.kind == "load" and a.detail == "warm" and not a.cut:
            loads.setdefault((a.phone, a.stage or ""), []).append(a.end_s - a.start_s)
    return loads


def device_mean_loads_s(outcome: CrowdOutcome) -> list[float]:
    """Per phone, the mean of its warm loads in the run (the published per-device mean)."""
    by_phone: dict[str, list[float]] = {}
    for (phone, _stage), durations in warm_loads_s(outcome).items():
        by_phone.setdefault(phone, []).extend(durations)
    return [fmean(durations) for durations in by_phone.values()]


def compare_to_reference(
    scenario: Scenario,
    profiles: list[PhoneProfile],
    spec: AndroidSpec,
    reference: dict[str, Measure],
) -> list[dict[str, Any]]:
    """Predicted vs published for every published metric, and the barrier prediction."""
    reps = scenario.repetitions
    runs = {
        (strategy, cache): [
            run_once(scenario, profiles, spec, cache, True, strategy, rep) for rep in range(reps)
        ]
        for strategy in (CROWDIO_STREAMING, CROWDIO_BARRIER)
        for cache in ("warm", "cold")
    }
    warm_streaming = runs[(CROWDIO_STREAMING, "warm")]
    cold_streaming = runs[(CROWDIO_STREAMING, "cold")]

    def latency_s(outcomes: list[CrowdOutcome]) -> list[float]:
        return [o.rows[0].total_ms / 1e3 for o in outcomes]

    def input_latency_s(outcomes: list[CrowdOutcome]) -> list[float]:
        """Per run, the mean over inputs of submission to that input's last stage done."""
        job_of = [o.jobs[0] for o in outcomes]
        return [fmean(t[-1].done_ms - j.submitted_ms for t in j.tasks) / 1e3 for j in job_of]

    def battery(outcomes: list[CrowdOutcome]) -> list[float]:
        return [o.rows[0].battery_mah or math.nan for o in outcomes]

    profile_of = {c.name: c.profile for c in _crowd(scenario).fleet}
    voltage_v = {p.name: p.battery.voltage_v for p in profiles}

    def battery_of_class(outcomes: list[CrowdOutcome], profile: str) -> list[float]:
        """mAh drawn for the job by each phone of one class, every run."""
        return [
            mah_from_joules(o.jobs[0].energy_j[phone.phone], voltage_v[profile])
            for o in outcomes
            for phone in o.phones
            if profile_of[phone.phone_class] == profile
        ]

    device_loads = [d for o in warm_streaming for d in device_mean_loads_s(o)]
    broadcast = [d / 1e3 for o in cold_streaming for d in o.jobs[0].broadcast_load_ms.values()]
    job = _crowd(scenario).job
    saving = 100.0 * (1 - compressed_activation_bytes(job) / job.activation_bytes)
    predicted: dict[str, tuple[list[float], str, str]] = {
        "pipeline_latency_streaming": (latency_s(warm_streaming), "s", "prediction"),
        "input_latency_streaming": (
            input_latency_s(warm_streaming),
            "s",
            "prediction: mean over the inputs, not the job's makespan",
        ),
        "pipeline_latency_barrier": (
            latency_s(runs[(CROWDIO_BARRIER, "warm")]),
            "s",
            "prediction (not published in the reference)",
        ),
        "input_latency_barrier": (
            input_latency_s(runs[(CROWDIO_BARRIER, "warm")]),
            "s",
            "prediction: mean over the inputs",
        ),
        "pipeline_latency_streaming_cold": (
            latency_s(cold_streaming),
            "s",
            "prediction: a first run, nothing cached",
        ),
        "cold_load": (broadcast, "s", "mean fitted (first-stage broadcast); std predicted"),
        "warm_load": (
            device_loads,
            "s",
            "per-device mean over its loads: mean fitted on the twin's schedule; its std "
            "split into classes and run noise, the twin's spread predicted",
        ),
        "peak_rss": (
            [s.peak_rss_mb for o in warm_streaming for s in o.phones],
            "MB",
            "input: the largest stage's RSS in the scenario",
        ),
        "battery_per_run": (battery(cold_streaming), "mAh", "fitted on a cold run"),
        "battery_per_warm_run": (battery(warm_streaming), "mAh", "prediction"),
        "activation_compression": ([saving], "pct", "input: the scenario's zlib saving"),
    }
    for stage in job.stages:
        predicted[f"warm_load_{stage.name}"] = (
            [
                d
                for o in warm_streaming
                for (_, name), ds in warm_loads_s(o).items()
                if name == stage.name
                for d in ds
            ],
            "s",
            f"prediction: one warm load of {stage.name} ({stage.size_mb:g} MB), any phone",
        )
    for facts in spec.phone_classes:
        for cache, outcomes in (("cold", cold_streaming), ("warm", warm_streaming)):
            predicted[f"battery_per_{cache}_run_{facts.name}"] = (
                battery_of_class(outcomes, facts.name),
                "mAh",
                f"prediction: one {facts.name} phone, streaming, {cache} run",
            )
    table = []
    for metric, (values, unit, role) in predicted.items():
        published = (
            None
            if metric.startswith("warm_load_")
            else reference.get(metric.replace("input_", "pipeline_"))
        )
        table.append(
            {
                "metric": metric,
                "unit": unit,
                "published_mean": None if published is None else published.mean,
                "published_std": None if published is None else published.std,
                "predicted_mean": round(fmean(values), 3),
                "predicted_std": round(pstdev(values), 3),
                "role": role,
            }
        )
    return table


def _session(machine: SessionLoadFit, slowdown: float) -> dict[str, float]:
    """A phone class's session parameters: this machine's load model ``slowdown`` times."""
    return {
        "floor_s": _round(machine.floor_ms * slowdown / 1e3),
        "s_per_mb": _round(machine.ms_per_mb * slowdown / 1e3),
        "s_per_mapped_mb": _round(machine.ms_per_mapped_mb * slowdown / 1e3),
        "mapped_above_mb": _round(MMAP_CEILING_MB),
    }


def _fit_record(fit: SessionLoadFit) -> dict[str, float]:
    return {
        "floor_ms": _round(fit.floor_ms),
        "ms_per_mb": _round(fit.ms_per_mb),
        "ms_per_mapped_mb": _round(fit.ms_per_mapped_mb),
        "ms_per_node": _round(fit.ms_per_node),
        "median_abs_error_pct": round(fit.median_abs_error_pct, 2),
        "max_abs_error_pct": round(fit.max_abs_error_pct, 2),
    }


def _round(value: float) -> float:
    return float(f"{value:.6g}")
