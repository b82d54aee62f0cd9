"""The twin's fleet: the scenario's members (``device_fleet``) checked for what a twin run
needs of their profiles, and what a twin run does not play for want of them."""

from __future__ import annotations

from pathlib import Path

from edgetwin.decoder_spec import DecoderSpec
from edgetwin.device_fleet import FleetMember, class_members, class_profile, class_ram_mb
from edgetwin.device_spec import DeviceSpec
from edgetwin.errors import InputError, shown
from edgetwin.number_text import exact_text
from edgetwin.profile import DeviceProfile, bootstrap_count
from edgetwin.scenario import Scenario
from edgetwin.unplayed_settings import unplayed_settings


def build_fleet(scenario: Scenario, scenario_path: Path | None) -> list[FleetMember]:
    """Expand device classes into members (``device_fleet``); profile paths are relative
    to the scenario file. A decoder's device needs a memory bandwidth; a device on a
    shared host no battery of its own, and the RAM of the host's other classes."""
    members = []
    host_ram: dict[str, tuple[int, float]] = {}  # host -> its first class and RAM
    for i, spec in enumerate(scenario.devices):
        profile = class_profile(spec, i, scenario_path)
        if isinstance(scenario.model, DecoderSpec) and profile.memory is None:
            problem = _no_bandwidth(spec, i, profile)
            raise InputError(scenario_path, f"devices.{i}.profile", problem)
        if spec.host is not None and profile.battery_wh is not None:
            problem = f"profile {profile.name} has a battery (a shared host's is not modelled)"
            raise InputError(scenario_path, f"devices.{i}.host", problem)
        if spec.host is not None:
            _check_host_ram(host_ram, spec.host, i, class_ram_mb(spec, profile), scenario_path)
        members += class_members(spec, profile)
    return members


def _check_host_ram(
    seen: dict[str, tuple[int, float]], host: str, index: int, ram_mb: float, path: Path | None
) -> None:
    """Ranks on one host share its memory: every class on it must have the same RAM."""
    first, first_ram_mb = seen.setdefault(host, (index, ram_mb))
    if ram_mb != first_ram_mb:
        problem = (
            f"{exact_text(ram_mb)} MB, where devices.{first} on the same host '{host}' has "
            f"{exact_text(first_ram_mb)} MB: ranks on one host share its memory; give its "
            "classes one ram_mb"
        )
        raise InputError(path, f"devices.{index}.ram_mb", problem)


def _no_bandwidth(spec: DeviceSpec, index: int, profile: DeviceProfile) -> str:
    """What a decoder's device whose profile has no memory bandwidth (nor the scenario) is
    told: the profile as the scenario names it (and by its own name), the key to add, the
    scenario's key that gives it, the command to fit it."""
    given = shown(spec.profile) if isinstance(spec.profile, str) else "given inline"
    named = "" if given == shown(profile.name) else f" ({profile.name})"
    return (
        f"profile {given}{named} has no memory.bandwidth_gbps, which a decoder needs: add "
        f"memory: {{bandwidth_gbps: GB/s}} (docs/profiles.md), set devices.{index}."
        "memory_bandwidth_gbps, or fit it with edgetwin calibrate-machine"
    )


def unplayed_by_fleet(scenario: Scenario, fleet: list[FleetMember]) -> list[str]:
    """What a twin run of ``scenario`` does not play for want of its fleet's profiles."""
    return unplayed_burst(scenario, fleet) + unsampled_profiles(scenario, fleet)


def unsampled_profiles(scenario: Scenario, fleet: list[FleetMember]) -> list[str]:
    """A warning when ``sample_profiles`` meets a profile whose fit kept no bootstrap
    samples: its devices run the fitted profile in every repetition."""
    if not scenario.sample_profiles:
        return []
    names = sorted({m.profile.name for m in fleet if bootstrap_count(m.profile) == 0})
    if not names:
        return []
    return [
        f"sample_profiles is true, but profile {', '.join(names)} keeps no bootstrap samples: "
        "its devices run the fitted profile in every repetition"
    ]


def unplayed_burst(scenario: Scenario, fleet: list[FleetMember]) -> list[str]:
    """A warning when ``network.burst_kb`` plays on no channel of a run: a token bucket lets
    a channel send at its sender's stack rate (``network.stack_mbps`` of its profile) while
    tokens last, so a sender without one has no rate to burst at (sim/network.py). On a
    shared medium the fastest a burst goes is the slowest stack; one stack rate suffices."""
    if scenario.network.burst_kb is None or scenario.crowd is not None:
        return []
    stacks = {m.profile.name: m.profile.network.stack_mbps for m in fleet}
    without = [name for name, stack_mbps in stacks.items() if stack_mbps is None]
    shared = scenario.network.medium == "shared"
    if not without or (shared and len(without) < len(stacks)):
        return []
    names = ", ".join(without)
    return [
        f"network.burst_kb is set, but profile {names} has no network.stack_mbps (the rate "
        "a burst is sent at): its devices send at the link rate, as without a token bucket"
    ]


def unplayed_in_twin(scenario: Scenario, scenario_path: Path | None) -> list[str]:
    """What the twin's runs of ``scenario`` do not play: ``unplayed_settings`` and
    ``unplayed_by_fleet``, for the workflows that sweep it."""
    warnings = unplayed_settings(scenario, "twin")
    if scenario.crowd is None:
        warnings += unplayed_by_fleet(scenario, build_fleet(scenario, scenario_path))
    return warnings
