"""One measured configuration of a table through the twin, on a fleet of one profile: what
the table fit, its residuals and its held-out refits predict for a row."""

from __future__ import annotations

from edgetwin.device_fleet import FleetMember
from edgetwin.device_spec import DeviceSpec
from edgetwin.profile import DeviceProfile
from edgetwin.scenario import Scenario
from edgetwin.sim.runner import RunOutcome, simulate
from edgetwin.sweep_points import Configuration


def simulate_config(
    scenario: Scenario, profile: DeviceProfile, config: Configuration
) -> RunOutcome:
    spec = DeviceSpec(name="dev", profile=profile, count=config.devices)
    fleet = [FleetMember(f"dev-{i}", spec, profile) for i in range(config.devices)]
    return simulate(scenario, fleet, config, rep=0)
