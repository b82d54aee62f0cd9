"""A scenario's devices as the twin builds them before a run: each device class expanded
by its ``count`` into named members, each with the class's profile (its memory bandwidth
override in place) and RAM. The twin runs on these members (``sim/fleet.py``) and a real
decoder run's launcher splits the layers on them (``configuration.fleet_layers``), so both
count a device alike."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from edgetwin.crowd_spec import member_names
from edgetwin.device_spec import DeviceSpec
from edgetwin.profile import DeviceProfile, bootstrap_variant, with_memory_bandwidth
from edgetwin.scenario import Scenario
from edgetwin.scenario_paths import device_profile


@dataclass(frozen=True)
class FleetMember:
    """One device of the expanded fleet (a device class with count n gives n members);
    ``profile`` is its class's with the class's memory bandwidth (``class_profile``)."""

    name: str
    spec: DeviceSpec
    profile: DeviceProfile

    @property
    def ram_mb(self) -> float:
        """Its RAM: the class's ``ram_mb``, else its profile's."""
        return class_ram_mb(self.spec, self.profile)

    def variant(self, index: int) -> FleetMember:
        """The member with its profile's ``index``-th bootstrap variant, the class's memory
        bandwidth still in place of a sampled one."""
        sampled = bootstrap_variant(self.profile, index)
        bandwidth_gbps = self.spec.memory_bandwidth_gbps
        return replace(self, profile=with_memory_bandwidth(sampled, bandwidth_gbps))


def class_profile(spec: DeviceSpec, index: int, scenario_path: Path | None) -> DeviceProfile:
    """The profile of device class ``index`` (``scenario_paths.device_profile``) with the
    class's ``memory_bandwidth_gbps`` in place of its own."""
    profile = device_profile(spec, index, scenario_path)
    return with_memory_bandwidth(profile, spec.memory_bandwidth_gbps)


def class_ram_mb(spec: DeviceSpec, profile: DeviceProfile) -> float:
    """The RAM of a device of class ``spec`` whose profile is ``profile``: the class's
    ``ram_mb``, else the profile's."""
    return spec.ram_mb or profile.ram_mb


def class_members(spec: DeviceSpec, profile: DeviceProfile) -> list[FleetMember]:
    """The members of class ``spec`` (its ``count`` of them) on ``profile`` (its
    ``class_profile``)."""
    return [FleetMember(name, spec, profile) for name in member_names(spec.name, spec.count)]


def fleet_members(scenario: Scenario, scenario_path: Path | None) -> list[FleetMember]:
    """Every member of the scenario's fleet, class by class in file order; profile paths
    relative to ``scenario_path``'s folder (None: absolute paths or shipped names)."""
    return [
        member
        for index, spec in enumerate(scenario.devices)
        for member in class_members(spec, class_profile(spec, index, scenario_path))
    ]
