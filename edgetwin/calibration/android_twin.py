"""The twin runs of an Android calibration: the calibration scenario played on candidate
phone profiles (recording on), and the loads read back from a run."""

from __future__ import annotations

from statistics import fmean

from edgetwin.calibration.android_inputs import AndroidSpec, crowd_section
from edgetwin.configuration import CrowdRun
from edgetwin.crowd_fleet import PhoneClass
from edgetwin.models.strategies.crowdio import CROWDIO_STREAMING
from edgetwin.phone_profile import PhoneProfile
from edgetwin.scenario import Scenario
from edgetwin.sim.crowd.runner import CrowdOutcome, CrowdSetup, simulate_crowd


def _setup(profiles: list[PhoneProfile], spec: AndroidSpec, scenario: Scenario) -> CrowdSetup:
    by_name = {p.name: p for p in profiles}
    names = {facts.name for facts in spec.phone_classes}
    classes = [
        PhoneClass(c, by_name[c.profile])
        for c in crowd_section(scenario).fleet
        if c.profile in names
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
    crowd = crowd_section(scenario).model_copy(update={"cache": cache})
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
