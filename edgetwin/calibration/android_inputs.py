"""What an Android calibration fits to: the spec (its phone classes and the assumptions
not fitted), the published reference (``metric,mean,std,unit``) and the scenario's crowd,
whose fleet counts the phones of each class. Bad input names the file and the field."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from edgetwin.calibration.readers.reference import read_metric_rows
from edgetwin.errors import InputError, shown
from edgetwin.scenario import Scenario
from edgetwin.schema import (
    FileName,
    PositiveFloat,
    Strict,
    load_yaml_model,
    read_yaml_mapping,
)

SPEC_KEY = "phone_classes"  # an Android calibration spec has this key, a Jetson one does not


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
    for row in read_metric_rows(path):
        metric, unit = row.text("metric"), row.optional_text("unit") or ""
        wanted = METRIC_UNITS.get(metric)
        if wanted is not None and unit != wanted:
            raise row.error("unit", f"{unit!r}: {metric} is read in {wanted}")
        measures[metric] = Measure(row.positive("mean"), row.number("std", minimum=0.0), unit)
    missing = [m for m in METRIC_UNITS if m not in measures]
    if missing:
        raise InputError(path, None, f"missing metrics: {', '.join(missing)}")
    return measures


def crowd_section(scenario: Scenario) -> Any:
    """The calibration scenario's crowd section (an InputError if it has none)."""
    if scenario.crowd is None:
        raise InputError(None, "scenario", "the calibration scenario has no 'crowd' section")
    return scenario.crowd


def class_counts(spec: AndroidSpec, scenario: Scenario, path: Path) -> list[int]:
    """Phones of each spec class in the scenario's fleet (matched by profile name)."""
    fleet = crowd_section(scenario).fleet
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
