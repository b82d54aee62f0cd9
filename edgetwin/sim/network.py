"""The network of the twin: fluid processor-sharing channels and transfers.

A channel has a capacity (Mbps) that may change during a run; every flow
active on it at once gets an equal share (WiFi airtime on a shared medium, a
NIC's uplink on a dedicated link). A transfer pays the per-message latency
first, then moves its bits through its channel.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from itertools import count

import simpy

from edgetwin.scenario import NetworkSpec

BITS_PER_BYTE = 8
TOLERANCE_MS = 1e-9  # a flow this close to done is done (float rounding)


@dataclass
class _Flow:
    remaining_bits: float
    efficiency: float
    done: simpy.Event


@dataclass(eq=False)
class Channel:
    """A link or a shared medium: capacity split equally among active flows."""

    env: simpy.Environment
    capacity_mbps: float
    name: str = "channel"
    _flows: dict[int, _Flow] = field(default_factory=dict)
    _ids: count[int] = field(default_factory=count)
    _last_update_ms: float = 0.0
    _generation: int = 0
    bits_delivered: float = 0.0

    def send(self, nbytes: float, efficiency: float = 1.0) -> simpy.Event:
        """An event that fires when ``nbytes`` have crossed the channel."""
        done = self.env.event()
        if nbytes <= 0:
            done.succeed()
            return done
        self._advance()
        self._flows[next(self._ids)] = _Flow(nbytes * BITS_PER_BYTE, efficiency, done)
        self._reschedule()
        return done

    def set_capacity(self, capacity_mbps: float) -> None:
        self._advance()
        self.capacity_mbps = capacity_mbps
        self._reschedule()

    @property
    def active_flows(self) -> int:
        return len(self._flows)

    def _rate_bits_per_ms(self, flow: _Flow) -> float:
        return self.capacity_mbps * 1e3 * flow.efficiency / len(self._flows)

    def _advance(self) -> None:
        elapsed_ms = self.env.now - self._last_update_ms
        self._last_update_ms = self.env.now
        if elapsed_ms <= 0 or not self._flows:
            return
        for flow in self._flows.values():
            moved = min(flow.remaining_bits, self._rate_bits_per_ms(flow) * elapsed_ms)
            flow.remaining_bits -= moved
            self.bits_delivered += moved

    def _reschedule(self) -> None:
        finished = [k for k, f in self._flows.items() if self._is_done(f)]
        for key in finished:
            flow = self._flows.pop(key)
            self.bits_delivered += flow.remaining_bits
            flow.done.succeed()
        self._generation += 1
        if not self._flows:
            return
        wait_ms = min(self._finish_ms(f) for f in self._flows.values())
        generation = self._generation
        wakeup = self.env.timeout(wait_ms)
        wakeup.callbacks.append(lambda _event: self._on_wakeup(generation))

    def _is_done(self, flow: _Flow) -> bool:
        """Done, up to float rounding of the flow or of the clock itself."""
        finish_ms = self._finish_ms(flow)
        return finish_ms <= TOLERANCE_MS or self.env.now + finish_ms == self.env.now

    def _finish_ms(self, flow: _Flow) -> float:
        return flow.remaining_bits / self._rate_bits_per_ms(flow)

    def _on_wakeup(self, generation: int) -> None:
        if generation == self._generation:
            self._advance()
            self._reschedule()


class Network:
    """Channels built from the scenario's network: one per device or one shared."""

    def __init__(
        self,
        env: simpy.Environment,
        spec: NetworkSpec,
        bandwidth_mbps: float,
        device_names: list[str],
    ) -> None:
        self.env = env
        self.spec = spec
        if spec.medium == "shared":
            shared = Channel(env, bandwidth_mbps, "wifi")
            self.channels = {name: shared for name in device_names}
        else:
            self.channels = {n: Channel(env, bandwidth_mbps, f"{n}-uplink") for n in device_names}
        self.bytes_sent: dict[str, float] = {name: 0.0 for name in device_names}
        self.bytes_received: dict[str, float] = {name: 0.0 for name in device_names}
        if spec.schedule:
            env.process(self._apply_schedule())

    def transfer(
        self, src: str, dst: str, nbytes: float, overhead_ms: float, efficiency: float
    ) -> Generator[simpy.Event, object, None]:
        """Send ``nbytes`` from ``src`` to ``dst``: latency + overhead, then the bits."""
        yield self.env.timeout(self.spec.latency_ms + overhead_ms)
        yield self.channels[src].send(nbytes, efficiency)
        self.bytes_sent[src] += nbytes
        self.bytes_received[dst] += nbytes

    def _apply_schedule(self) -> Generator[simpy.Event, object, None]:
        for step in sorted(self.spec.schedule, key=lambda s: s.at_ms):
            if step.at_ms > self.env.now:
                yield self.env.timeout(step.at_ms - self.env.now)
            for channel in dict.fromkeys(self.channels.values()):
                channel.set_capacity(step.bandwidth_mbps)
