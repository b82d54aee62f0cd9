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

Its parts: the spec and the reference (``android_inputs``), the twin's runs
(``android_twin``), the solved parameters (``android_fitter``) and the predicted vs
published table (``android_comparison``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from statistics import fmean

from pydantic import ValidationError

from edgetwin.calibration.android_comparison import compare_to_reference
from edgetwin.calibration.android_fitter import Fitter, class_z_scores, round_fitted
from edgetwin.calibration.android_inputs import (
    class_counts,
    crowd_section,
    load_android_spec,
    read_reference,
)
from edgetwin.calibration.profile_io import source_record, write_profiles
from edgetwin.calibration.session_load import (
    SessionLoadFit,
    fit_session_load,
    read_session_loads,
)
from edgetwin.errors import OUT_OPTION, InputError
from edgetwin.output_folder import output_kind
from edgetwin.phone_profile import PhoneProfile
from edgetwin.scenario import load_scenario
from edgetwin.schema import referenced_file


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
    counts = class_counts(spec, scenario, scenario_path)
    loads_path = referenced_file(spec.session_loads, base, spec_path, "session_loads").resolve()
    measured = read_session_loads(loads_path)
    try:  # measurements no profile fits (a load of 6,000 s, a latency std of 1,100 s)
        machine, with_nodes = fit_session_load(measured), fit_session_load(measured, per_node=True)
        warm, latency = reference["warm_load"], reference["pipeline_latency_streaming"]
        sizes_mb = [s.size_mb for s in crowd_section(scenario).job.stages]
        machine_mean_ms = fmean(machine.predict_ms(size) for size in sizes_mb)
        shape = [machine.predict_ms(size) / machine_mean_ms for size in sizes_mb]
        load_cv = latency.std / (warm.mean * math.sqrt(sum(x * x for x in shape)))
        sigma_run = min(warm.std, latency.std / len(sizes_mb))  # of a per-device mean
        sigma_dev = math.sqrt(warm.std**2 - sigma_run**2)
        z_scores = class_z_scores(counts)
        class_mean_s = [warm.mean + z * sigma_dev for z in z_scores]
        slowdown = [1e3 * mean_s / machine_mean_ms for mean_s in class_mean_s]
        fitter = Fitter(spec, scenario, machine, slowdown)
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
    stage_names = [s.name for s in crowd_section(scenario).job.stages]
    derived = {
        "machine_session_load": _fit_record(machine),
        "machine_session_load_with_nodes": _fit_record(with_nodes),
        "stage_load_shape": dict(zip(stage_names, map(round_fitted, shape), strict=True)),
        "slowdown_vs_machine": [round_fitted(k * fitter.load_scale) for k in slowdown],
        "class_mean_load_s": [round(m * fitter.load_scale, 4) for m in class_mean_s],
        "load_scale_for_schedule": round_fitted(fitter.load_scale),
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
            OUT_OPTION,
            "exists and is not a folder (an Android spec writes one profile per phone class)",
        )
    by_path = {android_profile_path(out_dir, profile): profile for profile in profiles}
    write_profiles(by_path, force)  # all or none: never some classes new and some old
    return list(by_path)


def android_profile_path(out_dir: Path, profile: PhoneProfile) -> Path:
    """Where ``write_android_profiles`` puts a phone class's profile."""
    return out_dir / f"{profile.name}.yaml"


def _fit_record(fit: SessionLoadFit) -> dict[str, float]:
    return {
        "floor_ms": round_fitted(fit.floor_ms),
        "ms_per_mb": round_fitted(fit.ms_per_mb),
        "ms_per_mapped_mb": round_fitted(fit.ms_per_mapped_mb),
        "ms_per_node": round_fitted(fit.ms_per_node),
        "median_abs_error_pct": round(fit.median_abs_error_pct, 2),
        "max_abs_error_pct": round(fit.max_abs_error_pct, 2),
    }
