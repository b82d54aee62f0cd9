"""One measured configuration of a table through the twin, on a fleet of one profile: what
the table fit, its residuals and its held-out refits predict for a row."""

from __future__ import annotations

from edgetwin.device_fleet import class_members
from edgetwin.device_spec import DeviceSpec
from edgetwin.profile import DeviceProfile
from edgetwin.scenario import Scenario
from edgetwin.sim.runner import RunOutcome, simulate
from edgetwin.sweep_points import Configuration


def simulate_config(
    scenario: Scenario, profile: DeviceProfile, config: Configuration
) -> RunOutcome:
    """``config`` run on one device class of ``profile``, as many devices as it has (the
    members a scenario's class of that count gives: ``device_fleet.class_members``)."""
    spec = DeviceSpec(name="dev", profile=profile, count=config.devices)
    return simulate(scenario, class_members(spec, profile), config, rep=0)
