"""How long one launch of real ranks may take before it is stopped: a start-up allowance
(imports, model build, process-group set-up) plus its FLOPs at the speed of a slow host
with every rank on its cores, and, on the emulator's shaped links, its time on the wire
twice over: its bytes at the slowest rate the launch meets, and a round trip at the
link's latency for every message its ranks wait for in turn. Generous on purpose: it
catches a hung rank, not a slow one."""

from edgetwin.scenario import Scenario
from edgetwin.sweep_points import Configuration

STARTUP_ALLOWANCE_S = 120.0
SLOWEST_HOST_FLOPS_PER_S = 2e9
WIRE_ALLOWANCE = 2.0  # x the time on the wire: headers, acknowledgements, both directions
# one-way latencies a message waits: GLOO's ring sends a step's data, then waits for the
# receiver's notification back (a tensor-parallel decode step's all-reduce step over 250 ms
# links took 0.53 s in the emulator)
LATENCIES_PER_MESSAGE = 2


def launch_deadline_s(flops: float, wire_s: float = 0.0) -> float:
    """Seconds a launch may take that does ``flops`` (every rank's, every generation or
    forward) and spends ``wire_s`` on its shaped links (``wire_s()``)."""
    return STARTUP_ALLOWANCE_S + flops / SLOWEST_HOST_FLOPS_PER_S + WIRE_ALLOWANCE * wire_s


def wire_s(
    scenario: Scenario, config: Configuration, contributed_bytes: float, messages: int
) -> float:
    """Seconds on ``config``'s shaped links: ``contributed_bytes`` (every rank's, summed) at
    the slowest rate its run meets (its own or a ``network.schedule`` step's), a ring
    passing each rank's piece on ``devices`` - 1 times, every byte through one shaper at
    the worst (the shared medium); and ``messages`` (every ring step and send the ranks
    wait for in turn: ``ring_steps``) a round trip each at the one-way
    ``network.latency_ms``."""
    slowest_mbps = min(
        [config.bandwidth_mbps, *(step.bandwidth_mbps for step in scenario.network.schedule)]
    )
    hops = max(config.devices - 1, 1)
    bytes_s = contributed_bytes * hops * 8 / (slowest_mbps * 1e6)
    return bytes_s + messages * LATENCIES_PER_MESSAGE * scenario.network.latency_ms / 1e3
