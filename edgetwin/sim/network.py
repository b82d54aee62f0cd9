"""The network of the twin: fluid processor-sharing channels and transfers.

A channel serves bits at its link rate, split equally among the flows active
on it (a NIC's uplink on a dedicated link), or, on a shared medium (WiFi
airtime), equally among the stations sending on it and each station's share
equally among its own flows, as WiFi's DCF gives each contending station equal
turns (a foreman sending to three phones gets the half beside one phone's upload,
not three quarters).
The rate may change during a run (a bandwidth schedule). Three optional
pieces of real links and stacks shape it further:

- a token bucket (tc htb ``burst``): while it holds tokens the channel may
  send at the sender's stack rate, above the configured rate; tokens refill
  at the configured rate, so the long-run rate never exceeds it;
- a stack rate: the most the sending software stack pushes, whatever the
  link allows (GLOO over loopback, say);
- a loss window: once a flow has sent that many bytes, only a fraction of the
  link time it uses carries new data (queue overflow and retransmission on a
  shallow shaped queue).

A transfer pays the per-message latency and overhead first, then moves its
bits through the sender's channel.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Generator, Hashable, Sequence
from dataclasses import dataclass
from itertools import count

import simpy

from edgetwin.network_spec import BandwidthStep, NetworkSpec, did_not_play
from edgetwin.number_text import exact_text
from edgetwin.profile import NetworkParams

BITS_PER_BYTE = 8
TOLERANCE_MS = 1e-9  # an event this close is now (float rounding); the hosts' too


@dataclass(slots=True)
class _Flow:
    remaining_bits: float
    sent_bits: float
    efficiency: float
    window_bits: float
    loss_goodput: float
    done: simpy.Event
    station: Hashable  # who sends it: on a shared medium, whose airtime it takes


class Channel:
    """A link or a shared medium: link time split equally among active flows, or with
    ``per_station`` (the shared medium) equally among the stations sending and each
    station's part equally among its flows."""

    def __init__(
        self,
        env: simpy.Environment,
        capacity_mbps: float,
        name: str = "channel",
        burst_bytes: float | None = None,
        stack_mbps: float | None = None,
        per_station: bool = False,
    ) -> None:
        self.env = env
        self.per_station = per_station
        self.capacity_mbps = capacity_mbps
        self.name = name
        self.burst_bits = 0.0 if burst_bytes is None else burst_bytes * BITS_PER_BYTE
        self.bucket_bits = self.burst_bits
        self.stack_mbps = math.inf if stack_mbps is None else stack_mbps
        self.bits_delivered = 0.0
        self._set_rates()
        self._flows: dict[int, _Flow] = {}
        self._station_flows: Counter[Hashable] = Counter()  # active flows per station
        self._ids = count()
        self._last_update_ms = env.now
        self._wakeup: simpy.Timeout | None = None  # the one standing wake-up

    def send(
        self,
        nbytes: float,
        efficiency: float = 1.0,
        window_bytes: float = math.inf,
        loss_goodput: float = 1.0,
        station: Hashable = None,
    ) -> simpy.Event:
        """An event that fires when ``nbytes`` have crossed the channel; ``station``: who
        sends them (a per-station channel's flows without one are each a station)."""
        done = self.env.event()
        if nbytes <= 0:
            done.succeed()
            return done
        self._advance()
        key = next(self._ids)
        flow = _Flow(
            nbytes * BITS_PER_BYTE,
            0.0,
            efficiency,
            window_bytes * BITS_PER_BYTE,
            loss_goodput,
            done,
            (station if station is not None else ("flow", key)) if self.per_station else None,
        )
        self._flows[key] = flow
        self._station_flows[flow.station] += 1
        self._reschedule()
        return done

    def cancel(self, done: simpy.Event) -> None:
        """Stop the flow ``send`` returned ``done`` for (its sender left): its share of the
        link is free for the others from now on; ``done`` never fires. Nothing happens
        when that flow has already ended."""
        self._advance()
        for key, flow in self._flows.items():
            if flow.done is done:
                self._remove(key)
                self._reschedule()
                return

    def set_capacity(self, capacity_mbps: float) -> None:
        self._advance()
        self.capacity_mbps = capacity_mbps
        self._set_rates()
        self._reschedule()

    @property
    def active_flows(self) -> int:
        return len(self._flows)

    def _remove(self, key: int) -> _Flow:
        flow = self._flows.pop(key)
        station_flows = self._station_flows
        station_flows[flow.station] -= 1
        if not station_flows[flow.station]:
            del station_flows[flow.station]
        return flow

    def _ways(self, flow: _Flow) -> int:
        """Into how many parts the link time in use is split for ``flow``: the active flows,
        or on a per-station channel the stations sending times its station's flows."""
        if self.per_station:
            station_flows = self._station_flows
            return len(station_flows) * station_flows[flow.station]
        return len(self._flows)

    # ------------------------------------------------------------ rates
    def _set_rates(self) -> None:
        """The link's rates in bits per ms, computed once per capacity (not per fluid step)."""
        self._bursting = math.isfinite(self.stack_mbps) and self.stack_mbps > self.capacity_mbps
        self._stack_bits_per_ms = self.stack_mbps * 1e3
        self._steady_bits_per_ms = min(self.capacity_mbps, self.stack_mbps) * 1e3
        self._refill_bits_per_ms = self.capacity_mbps * 1e3

    def _link_bits_per_ms(self) -> float:
        """Link time in use: the stack rate while tokens last, else the configured rate."""
        if self._bursting and self.bucket_bits > 0:
            return self._stack_bits_per_ms
        return self._steady_bits_per_ms

    # ------------------------------------------------------------ fluid steps
    # A flow's goodput is the link time in use, split ``_ways`` ways, times its
    # efficiency, and times loss_goodput once it has sent window_bits (written out in each
    # fluid step: the hot path of every transfer); tokens refill at ``_refill_bits_per_ms``;
    # an event closer than TOLERANCE_MS is now.
    def _advance(self) -> None:
        now = self.env.now
        elapsed_ms = now - self._last_update_ms
        self._last_update_ms = now
        if elapsed_ms <= 0:
            return
        flows = self._flows
        if flows:
            used_bits_per_ms = self._link_bits_per_ms()
            share = used_bits_per_ms / len(flows)
            per_station = self.per_station
            delivered = self.bits_delivered
            for flow in flows.values():
                if per_station:
                    share = used_bits_per_ms / self._ways(flow)
                factor = flow.efficiency * (
                    1.0 if flow.sent_bits < flow.window_bits else flow.loss_goodput
                )
                moved = min(flow.remaining_bits, share * factor * elapsed_ms)
                flow.remaining_bits -= moved
                flow.sent_bits += moved
                delivered += moved
            self.bits_delivered = delivered
        else:
            used_bits_per_ms = 0.0
        if self.burst_bits:  # without a bucket, it stays empty
            net_refill = (self._refill_bits_per_ms - used_bits_per_ms) * elapsed_ms
            bucket_bits = self.bucket_bits + net_refill
            self.bucket_bits = min(self.burst_bits, bucket_bits if bucket_bits > 0.0 else 0.0)

    def _reschedule(self) -> None:
        self._wakeup = None  # a wake-up scheduled before stands no more
        flows = self._flows
        if not flows:
            return
        self._snap_to_boundaries(flows)
        if not flows:
            return
        wakeup = self._wakeup = self.env.timeout(self._next_boundary_ms(flows))
        wakeup.callbacks.append(self._on_wakeup)

    def _next_boundary_ms(self, flows: dict[int, _Flow]) -> float:
        """Time to the next state change: a flow ends or leaves its window, tokens run out."""
        link = self._link_bits_per_ms()
        share = link / len(flows)
        per_station = self.per_station
        soonest = math.inf
        for flow in flows.values():
            if per_station:
                share = link / self._ways(flow)
            inside = flow.sent_bits < flow.window_bits
            rate = share * (flow.efficiency * (1.0 if inside else flow.loss_goodput))
            ends = flow.remaining_bits / rate
            if ends < soonest:
                soonest = ends
            if inside:
                leaves = (flow.window_bits - flow.sent_bits) / rate
                if leaves < soonest:
                    soonest = leaves
        drain = link - self._refill_bits_per_ms  # tokens drain only while bursting
        if self._bursting and self.bucket_bits > 0 and drain > 0:
            empties = self.bucket_bits / drain
            if empties < soonest:
                soonest = empties
        return soonest

    def _snap_to_boundaries(self, flows: dict[int, _Flow]) -> None:
        """Settle what float rounding left a hair away from a boundary, then end done flows."""
        now = self.env.now
        if self._bursting and self.bucket_bits > 0:  # tokens drain only while bursting
            drain = self._stack_bits_per_ms - self._refill_bits_per_ms
            wait_ms = self.bucket_bits / drain if drain > 0 else math.inf
            if wait_ms <= TOLERANCE_MS or now + wait_ms == now:
                self.bucket_bits = 0.0
        link = self._link_bits_per_ms()
        for key in list(flows):
            flow = flows[key]
            inside = flow.sent_bits < flow.window_bits
            factor = flow.efficiency * (1.0 if inside else flow.loss_goodput)
            rate = link / self._ways(flow) * factor
            if inside:
                wait_ms = (flow.window_bits - flow.sent_bits) / rate
                if wait_ms <= TOLERANCE_MS or now + wait_ms == now:
                    flow.sent_bits = flow.window_bits
            wait_ms = flow.remaining_bits / rate
            if wait_ms <= TOLERANCE_MS or now + wait_ms == now:
                self._remove(key)
                self.bits_delivered += flow.remaining_bits
                flow.done.succeed()

    def _on_wakeup(self, wakeup: simpy.Event) -> None:
        if wakeup is self._wakeup:
            self._advance()
            self._reschedule()


class Network:
    """Channels built from the scenario's network: one per device or one shared."""

    def __init__(
        self,
        env: simpy.Environment,
        spec: NetworkSpec,
        bandwidth_mbps: float,
        stacks: dict[str, NetworkParams],
    ) -> None:
        self.env = env
        self.spec = spec
        self.stacks = stacks
        burst_bytes = None if spec.burst_kb is None else spec.burst_kb * 1024
        if spec.medium == "shared":
            slowest = min((s.stack_mbps or math.inf) for s in stacks.values())
            shared = Channel(
                env, bandwidth_mbps, "wifi", burst_bytes, _finite(slowest), per_station=True
            )
            self.channels = {name: shared for name in stacks}
        else:
            self.channels = {
                name: Channel(env, bandwidth_mbps, f"{name}-uplink", burst_bytes, s.stack_mbps)
                for name, s in stacks.items()
            }
        self.bytes_sent: dict[str, float] = {name: 0.0 for name in stacks}
        self.bytes_received: dict[str, float] = {name: 0.0 for name in stacks}
        self.played_steps: list[BandwidthStep] = []  # the schedule's steps the run reached
        if spec.schedule:
            env.process(self._apply_schedule())

    def start_measuring(self) -> None:
        """Forget the bytes carried so far (after warm-up), as a device its time and energy."""
        self.bytes_sent = dict.fromkeys(self.bytes_sent, 0.0)
        self.bytes_received = dict.fromkeys(self.bytes_received, 0.0)

    def memoryless(self) -> bool:
        """Whether a transfer started now takes what it took before from the same state:
        a constant rate, no token bucket, no other flow on any channel."""
        idle = all(channel.active_flows == 0 for channel in self.channels.values())
        return idle and not self.spec.schedule and self.spec.burst_kb is None

    def transfer(
        self, src: str, dst: str, nbytes: float, duplex: bool = False
    ) -> Generator[simpy.Event, object, None]:
        """Send ``nbytes`` from ``src`` to ``dst``: latency + overhead, then the bits.

        ``duplex``: ``dst`` sends at the same time (its acknowledgements of these bits
        wait behind its own data): the message gets ``duplex_efficiency`` of its share.
        """
        stack = self.stacks[src]
        yield self.env.timeout(self.spec.latency_ms + stack.overhead_ms(nbytes))
        window_bytes = math.inf if stack.loss_window_kb is None else stack.loss_window_kb * 1024
        efficiency = stack.bandwidth_efficiency * (stack.duplex_efficiency if duplex else 1.0)
        yield self.channels[src].send(
            nbytes, efficiency, window_bytes, stack.loss_goodput, station=src
        )
        self.bytes_sent[src] += nbytes
        self.bytes_received[dst] += nbytes

    def _apply_schedule(self) -> Generator[simpy.Event, object, None]:
        for step in sorted(self.spec.schedule, key=lambda s: s.at_ms):
            if step.at_ms > self.env.now:
                yield self.env.timeout(step.at_ms - self.env.now)
            for channel in dict.fromkeys(self.channels.values()):
                channel.set_capacity(step.bandwidth_mbps)
            self.played_steps.append(step)

    def unplayed_steps(self) -> tuple[BandwidthStep, ...]:
        """The schedule's steps the run has not reached (so far: at its end, it ended first)."""
        return tuple(step for step in self.spec.schedule if step not in self.played_steps)


def unplayed_schedule(
    per_run: Sequence[Sequence[BandwidthStep]], warmup: bool = True, runs_noun: str = "runs"
) -> list[str]:
    """A warning per schedule step that some runs ended before, from each run's
    ``Network.unplayed_steps`` (``per_run``, one entry per run), as the emulator says it of
    its launches (emu/mininet/faults.py); ``warmup``: the runs begin with warm-up batches
    (``runner.warms_up``); ``runs_noun``: what the runs are called."""
    counts = Counter(step for steps in per_run for step in steps)
    start = "each run's start" + (", its warm-up batches included" if warmup else "")
    return [
        did_not_play(
            f"network.schedule step to {exact_text(step.bandwidth_mbps)} Mbps",
            step.at_ms / 1e3,
            counts[step],
            len(per_run),
            runs_noun,
            start,
        )
        for step in sorted(counts, key=lambda step: step.at_ms)
    ]


def _finite(value: float) -> float | None:
    return None if math.isinf(value) else value
