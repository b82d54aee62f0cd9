"""Fit Android phone profiles to the published CROWDio measurements.

The reference gives per-device mean +- std over five heterogeneous phones
and ten runs. The fit is written down in the spec (its distinguishing key is
``phone_classes``) and here:

1. Warm load (session creation from storage): the published std is split
   into run-to-run noise and differences between phones. A streaming run has
   S loads in series on its critical path, so the published run-to-run std of
   the pipeline latency bounds the noise of one load: sigma_run =
   latency_std / sqrt(S). The rest, sigma_dev = sqrt(std^2 - sigma_run^2), is
   spread over the classes (slowest first in the spec, counts from the
   scenario's fleet) at equally spaced z-scores of mean 0 and variance 1.
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

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean, pstdev
from typing import Any

import yaml
from scipy.optimize import brentq

from edgetwin.atomic import write_text_atomic
from edgetwin.calibration.profile_io import source_record
from edgetwin.configuration import CrowdRun
from edgetwin.crowd_fleet import PhoneClass
from edgetwin.errors import InputError
from edgetwin.models.strategies.crowdio import CROWDIO_BARRIER, CROWDIO_STREAMING
from edgetwin.phone_profile import PhoneProfile
from edgetwin.results import read_table
from edgetwin.scenario import Scenario, load_scenario
from edgetwin.schema import (
    PositiveFloat,
    Strict,
    load_yaml_model,
    read_yaml_mapping,
)
from edgetwin.sim.crowd.costs import compressed_activation_bytes, mah_from_joules
from edgetwin.sim.crowd.runner import CrowdOutcome, CrowdSetup, simulate_crowd

SPEC_KEY = "phone_classes"  # an Android calibration spec has this key, a Jetson one does not
STATES = ("idle", "inference", "load", "transfer")
REQUIRED_METRICS = (
    "pipeline_latency_streaming",
    "cold_load",
    "warm_load",
    "peak_rss",
    "battery_per_run",
    "activation_compression",
)


class PhoneClassFacts(Strict):
    """What is known or assumed about one class of phone, not fitted."""

    name: str
    description: str = ""
    ram_mb: PositiveFloat
    cpu_gflops: PositiveFloat
    battery_mah: PositiveFloat
    has_gpu: bool = False


class RelativePower(Strict):
    """Power of each state relative to inference (the fit solves the scale)."""

    idle: float
    inference: float
    load: float
    transfer: float


class Assumptions(Strict):
    os_reserved_mb: PositiveFloat
    voltage_v: PositiveFloat
    inference_floor_ms: float
    message_overhead_ms: float
    cache_mb: PositiveFloat
    relative_power: RelativePower


class AndroidSpec(Strict):
    """An Android calibration job: the reference, the scenario, the classes, the assumptions."""

    reference: str
    scenario: str
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
    """``metric,mean,std,unit`` rows; a bad cell names the file and the line."""
    if not path.is_file():
        raise InputError(path, None, "file not found")
    measures = {}
    for line, row in enumerate(read_table(path), start=2):
        try:
            measures[row["metric"]] = Measure(float(row["mean"]), float(row["std"]), row["unit"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(path, f"line {line}", f"cannot read row: {exc}") from None
    missing = [m for m in REQUIRED_METRICS if m not in measures]
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
    reference_path = (base / spec.reference).resolve()
    scenario_path = (base / spec.scenario).resolve()
    reference = read_reference(reference_path)
    scenario = load_scenario(scenario_path)
    counts = _class_counts(spec, scenario, scenario_path)
    warm, latency = reference["warm_load"], reference["pipeline_latency_streaming"]
    stages = len(_crowd(scenario).job.stages)
    sigma_run = min(warm.std, latency.std / math.sqrt(stages))
    sigma_dev = math.sqrt(warm.std**2 - sigma_run**2)
    z_scores = _z_scores(counts)
    warm_s = [warm.mean + z * sigma_dev for z in z_scores]
    fitter = _Fitter(spec, scenario, warm_s)
    efficiency = fitter.solve_efficiency(reference["cold_load"].mean)
    power_w = fitter.solve_power(efficiency, reference["battery_per_run"].mean)
    profiles = fitter.profiles(efficiency, power_w, load_cv=sigma_run / warm.mean)
    derived = {
        "sigma_run_s": round(sigma_run, 4),
        "sigma_between_phones_s": round(sigma_dev, 4),
        "z_scores": [round(z, 4) for z in z_scores],
        "phones_per_class": counts,
        "wifi_share_efficiency": round(efficiency, 6),
        "power_w": {state: round(w, 4) for state, w in power_w.items()},
    }
    fit = {
        "method": "warm load split into phone classes and run noise (sigma_run = latency std "
        "/ sqrt(S)); WiFi share solved on the twin's cold broadcast; one power scale "
        "solved on the twin's cold-run battery; latency not fitted",
        "assumptions": spec.assumptions.model_dump(),
        "derived": derived,
        "sources": [
            source_record(reference_path),
            source_record(scenario_path),
        ],
        "command": command,
        "comparison": compare_to_reference(scenario, profiles, spec, reference),
    }
    return [p.model_copy(update={"fit": fit}) for p in profiles]


def write_android_profiles(profiles: Sequence[PhoneProfile], out_dir: Path) -> list[Path]:
    """Write ``out_dir/<name>.yaml`` for each profile, with a header naming the command."""
    paths = []
    for profile in profiles:
        command = profile.fit.get("command", "edgetwin calibrate")
        header = f"# Generated by `{command}`; do not edit by hand.\n"
        body = yaml.safe_dump(profile.model_dump(mode="json"), sort_keys=False, width=100)
        path = out_dir / f"{profile.name}.yaml"
        write_text_atomic(path, header + body)
        paths.append(path)
    return paths


# ---------------------------------------------------------------- fitting


def _crowd(scenario: Scenario) -> Any:
    if scenario.crowd is None:
        raise InputError(None, "scenario", "the calibration scenario has no 'crowd' section")
    return scenario.crowd


def _class_counts(spec: AndroidSpec, scenario: Scenario, path: Path) -> list[int]:
    """Phones of each spec class in the scenario's fleet (matched by profile name)."""
    fleet = _crowd(scenario).fleet
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

    def __init__(self, spec: AndroidSpec, scenario: Scenario, warm_s: list[float]) -> None:
        self.spec = spec
        self.scenario = scenario
        self.warm_s = warm_s

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
                    "session": {"warm_load_s": _round(warm), "load_cv": _round(load_cv)},
                    "network": {
                        "message_overhead_ms": a.message_overhead_ms,
                        "bandwidth_efficiency": _round(efficiency),
                    },
                    "battery": {"capacity_mah": facts.battery_mah, "voltage_v": a.voltage_v},
                    "power": {f"{s}_w": _round(power_w[s]) for s in STATES},
                }
            )
            for facts, warm in zip(self.spec.phone_classes, self.warm_s, strict=True)
        ]

    def relative_power(self) -> dict[str, float]:
        return self.spec.assumptions.relative_power.model_dump()

    def solve_efficiency(self, cold_mean_s: float) -> float:
        """WiFi share at which the cold broadcast of the first stage takes ``cold_mean_s``."""

        def gap(efficiency: float) -> float:
            profiles = self.profiles(efficiency, self.relative_power(), load_cv=0.0)
            outcome = run_once(self.scenario, profiles, self.spec, "cold", noise=False)
            return broadcast_load_s(outcome) - cold_mean_s

        low, high = 0.01, 2.0
        if gap(high) > 0:
            return high
        return float(brentq(gap, low, high, xtol=1e-9))

    def solve_power(self, efficiency: float, battery_mah: float) -> dict[str, float]:
        """Watts per state: the relative powers scaled to the published battery per run."""
        relative = self.relative_power()
        profiles = self.profiles(efficiency, relative, load_cv=0.0)
        outcome = run_once(self.scenario, profiles, self.spec, "cold", noise=False)
        predicted = outcome.rows[0].battery_mah or math.nan
        scale = battery_mah / predicted
        return {state: w * scale for state, w in relative.items()}


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
    run = CrowdRun(strategy, crowd.schedulers[0], rep)
    return simulate_crowd(variant, _setup(profiles, spec, variant), run, record=True)


def broadcast_load_s(outcome: CrowdOutcome) -> float:
    """Mean duration of the first job's broadcast loads of the first stage."""
    durations = list(outcome.jobs[0].broadcast_load_ms.values())
    return fmean(durations) / 1e3


def load_durations_s(outcome: CrowdOutcome, kind: str) -> list[float]:
    """Every cold or warm load of a run, in seconds."""
    return [
        a.end_s - a.start_s
        for a in outcome.recorder.activities
        if a.kind == "load" and a.detail == kind
    ]


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

    warm_loads = [d for o in warm_streaming for d in load_durations_s(o, "warm")]
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
        "warm_load": (warm_loads, "s", "mean and std fitted (classes + run noise)"),
        "peak_rss": (
            [s.peak_rss_mb for o in warm_streaming for s in o.phones],
            "MB",
            "input: the largest stage's RSS in the scenario",
        ),
        "battery_per_run": (battery(cold_streaming), "mAh", "fitted on a cold run"),
        "battery_per_warm_run": (battery(warm_streaming), "mAh", "prediction"),
        "activation_compression": ([saving], "pct", "input: the scenario's zlib saving"),
    }
    for facts in spec.phone_classes:
        for cache, outcomes in (("cold", cold_streaming), ("warm", warm_streaming)):
            predicted[f"battery_per_{cache}_run_{facts.name}"] = (
                battery_of_class(outcomes, facts.name),
                "mAh",
                f"prediction: one {facts.name} phone, streaming, {cache} run",
            )
    table = []
    for metric, (values, unit, role) in predicted.items():
        published = reference.get(metric.replace("input_", "pipeline_"))
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


def _round(value: float) -> float:
    return float(f"{value:.6g}")
