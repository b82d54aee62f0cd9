"""How long one launch of real ranks may take before it is stopped: a start-up allowance
(imports, model build, process-group set-up) plus its FLOPs at the speed of a slow host
with every rank on its cores, and, on the emulator's shaped links, its bytes at the
slowest rate the launch meets, twice over. Generous on purpose: it catches a hung rank,
not a slow one."""

from edgetwin.scenario import Scenario
from edgetwin.sweep_points import Configuration

STARTUP_ALLOWANCE_S = 120.0
SLOWEST_HOST_FLOPS_PER_S = 2e9
WIRE_ALLOWANCE = 2.0  # x the bytes' time at the rate: headers, both directions, the split


def launch_deadline_s(flops: float, wire_s: float = 0.0) -> float:
    """Seconds a launch may take that does ``flops`` (every rank's, every generation or
    forward) and whose bytes take ``wire_s`` on its shaped links (``wire_s()``)."""
    return STARTUP_ALLOWANCE_S + flops / SLOWEST_HOST_FLOPS_PER_S + WIRE_ALLOWANCE * wire_s


def wire_s(scenario: Scenario, config: Configuration, contributed_bytes: float) -> float:
    """Seconds ``contributed_bytes`` (every rank's, summed) take on ``config``'s shaped
    links at the slowest rate its run meets (its own or a ``network.schedule`` step's):
    a ring passes each rank's piece on ``devices`` - 1 times, every byte through one
    shaper at the worst (the shared medium)."""
    slowest_mbps = min(
        [config.bandwidth_mbps, *(step.bandwidth_mbps for step in scenario.network.schedule)]
    )
    hops = max(config.devices - 1, 1)
    return contributed_bytes * hops * 8 / (slowest_mbps * 1e6)
