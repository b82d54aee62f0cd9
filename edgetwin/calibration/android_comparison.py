"""The fitted Android profiles against the published figures: every published metric
predicted by the twin (mean and std over the scenario's runs), and the predictions the
reference does not publish (barrier latency, each stage's warm load, each class's battery)."""

from __future__ import annotations

import math
from statistics import fmean, pstdev
from typing import Any

from edgetwin.calibration.android_inputs import AndroidSpec, Measure, crowd_section
from edgetwin.calibration.android_twin import device_mean_loads_s, run_once, warm_loads_s
from edgetwin.models.strategies.crowdio import CROWDIO_BARRIER, CROWDIO_STREAMING
from edgetwin.number_text import exact_text
from edgetwin.phone_profile import PhoneProfile
from edgetwin.profile import mah_from_joules
from edgetwin.scenario import Scenario
from edgetwin.sim.crowd.costs import compressed_activation_bytes
from edgetwin.sim.crowd.runner import CrowdOutcome


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

    profile_of = {c.name: c.profile for c in crowd_section(scenario).fleet}
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
    job = crowd_section(scenario).job
    saving = 100.0 * (1 - compressed_activation_bytes(job) / job.activation_bytes)
    largest = max(job.stages, key=lambda stage: stage.peak_mb)
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
            [s.peak_session_mb for o in warm_streaming for s in o.phones],
            "MB",
            f"input: the session RAM of the scenario's largest stage ({largest.name}, "
            f"{exact_text(largest.peak_mb)} MB), the twin's peak_session_mb",
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
            f"prediction: one warm load of {stage.name} ({exact_text(stage.size_mb)} MB), any "
            "phone",
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
