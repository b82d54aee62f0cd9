"""The crowd's phones: classes resolved to profiles, expanded to named phones.

The twin and the emulator build the same phones from a scenario with it, and both
refuse a job stage that no class of the fleet can hold (``resolve_fleet``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgetwin.crowd_spec import CrowdSpec, PhoneClassSpec, StageSpec, member_names
from edgetwin.errors import InputError
from edgetwin.models.crowd.views import session_fits
from edgetwin.number_text import exact_text, figure_text
from edgetwin.phone_profile import PhoneProfile, load_phone_profile


@dataclass(frozen=True)
class PhoneClass:
    """A class of the fleet with its profile loaded."""

    spec: PhoneClassSpec
    profile: PhoneProfile

    @property
    def session_budget_mb(self) -> float:
        """RAM a phone of the class gives a session: its RAM (the class's ``ram_mb``, else
        the profile's) less what Android keeps."""
        return self.profile.session_budget_mb(self.spec.ram_mb)

    def takes(self, need_mb: float) -> bool:
        """Whether a session that needs ``need_mb`` fits the session budget of a phone of
        the class (``session_fits``, the core's rule; a load unloads the resident stage
        first, so nothing else is held then)."""
        return session_fits(need_mb, self.session_budget_mb)

    def holds(self, stage: StageSpec) -> bool:
        """Whether a phone of the class can make ``stage`` resident: its session at its
        peak fits (``takes``)."""
        return self.takes(stage.peak_mb)


@dataclass(frozen=True)
class PhoneSetup:
    """One phone of the expanded fleet."""

    name: str
    phone_class: PhoneClass
    battery_start_pct: float


def resolve_classes(crowd: CrowdSpec, scenario_path: Path | None) -> list[PhoneClass]:
    """Load each class's profile (a shipped name, or a path relative to the scenario)."""
    base = None if scenario_path is None else scenario_path.resolve().parent
    classes = []
    for i, spec in enumerate(crowd.fleet):
        try:
            profile = load_phone_profile(spec.profile, base)
        except InputError as exc:
            if exc.path is not None:  # the profile file itself is wrong: it names itself
                raise
            raise InputError(scenario_path, f"crowd.fleet.{i}.profile", exc.problem) from None
        phone_class = PhoneClass(spec, profile)
        if phone_class.session_budget_mb <= 0:  # the profile's own RAM is above its reserve
            ram_mb = spec.ram_mb or profile.ram_mb
            problem = (
                f"{exact_text(ram_mb)} MB leaves the app no memory after the "
                f"{exact_text(profile.os_reserved_mb)} MB Android keeps ({profile.name})"
            )
            raise InputError(scenario_path, f"crowd.fleet.{i}.ram_mb", problem)
        classes.append(phone_class)
    return classes


def resolve_fleet(crowd: CrowdSpec, scenario_path: Path | None) -> list[PhoneClass]:
    """``resolve_classes``, after checking that the fleet has phones; then that a class
    holds every stage of the job (``check_stages_fit``)."""
    if sum(crowd.class_counts()) == 0:
        raise InputError(scenario_path, "crowd.fleet", "the fleet has no phones")
    classes = resolve_classes(crowd, scenario_path)
    check_stages_fit(crowd, classes, scenario_path)
    return classes


def check_stages_fit(
    crowd: CrowdSpec, classes: Sequence[PhoneClass], scenario_path: Path | None
) -> None:
    """``InputError`` naming the stage if no class of the fleet holds it (``holds``): its
    tasks could never run and the job would end unfinished. Some classes suffice; a
    class with no phones at a ``fleet_size`` counts (a plan sweeps sizes down to it)."""
    for i, stage in enumerate(crowd.job.stages):
        if any(phone_class.holds(stage) for phone_class in classes):
            continue
        key = "ram_mb" if stage.load_peak_mb is None else "load_peak_mb"
        problem = (
            f"stage {stage.name}'s session needs {exact_text(stage.peak_mb)} MB and fits no phone "
            "class:"
            f" {largest_budget(classes)}"
        )
        raise InputError(scenario_path, f"crowd.job.stages.{i}.{key}", problem)


def largest_budget(classes: Sequence[PhoneClass]) -> str:
    """How an error about a session that fits no class names the largest budget: ``the
    largest session budget is 4608 MB (class high: 6144 MB of RAM less the 1536 MB Android
    keeps)``."""
    largest = max(classes, key=lambda phone_class: phone_class.session_budget_mb)
    profile = largest.profile
    ram_mb = largest.spec.ram_mb or profile.ram_mb
    return (
        f"the largest session budget is {figure_text(largest.session_budget_mb)} MB (class"
        f" {largest.spec.name}: {exact_text(ram_mb)} MB of RAM less the "
        f"{exact_text(profile.os_reserved_mb)} MB"
        " Android keeps)"
    )


def expand_fleet(
    crowd: CrowdSpec, classes: list[PhoneClass], rng: np.random.Generator
) -> list[PhoneSetup]:
    """Named phones (class name, or name-k when a class has several), starting battery drawn."""
    phones = []
    for phone_class, count in zip(classes, crowd.class_counts(), strict=True):
        low, high = phone_class.spec.battery_start_pct
        for name in member_names(phone_class.spec.name, count):
            level = low if low == high else float(rng.uniform(low, high))
            phones.append(PhoneSetup(name, phone_class, level))
    return phones
