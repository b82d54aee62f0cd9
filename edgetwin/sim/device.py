"""A device of the twin: power states, energy, RAM, battery and availability.

The device keeps the state it is in (idle, compute, host, staging, comm,
load) and integrates energy from the power of each state actually visited.
A battery empties at the power of the current state; when it is empty the
device leaves. An availability process takes the device down and up again.
Leaving interrupts whatever process the device is serving. A rank on a shared host
(``sim/host.py``) computes on the host's accelerator and books its part of the host's
power.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass

import numpy as np
import simpy

from edgetwin.availability_spec import (
    Availability,
    ConstantDist,
    ExponentialDist,
    LognormalDist,
    WeibullDist,
)
from edgetwin.profile import J_PER_WH, POWER_STATES, DeviceProfile
from edgetwin.sim.host import Host


@dataclass(frozen=True)
class Interval:
    """One stretch of time a device spent in one state (for traces and conservation)."""

    device: str
    state: str
    start_ms: float
    end_ms: float
    label: str


class DeviceLeft(Exception):
    """Cause given to an interrupt when a device leaves (down or battery empty)."""

    def __init__(self, device: str, reason: str) -> None:
        super().__init__(f"{device}: {reason}")
        self.device = device
        self.reason = reason


class Device:
    """One simulated device, driven by the processes that use it: a fleet member's profile
    and RAM (``device_fleet.FleetMember``), or a phone's."""

    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        profile: DeviceProfile,
        ram_mb: float,
        battery_wh: float | None = None,
        drain_until_ms: float = math.inf,
        host: Host | None = None,
    ) -> None:
        self.env = env
        self.name = name
        self.profile = profile
        self._power_w = {state: profile.power.of(state) for state in POWER_STATES}
        self.ram_mb = ram_mb
        capacity_wh = battery_wh or profile.battery_wh
        self.battery_j: float | None = None if capacity_wh is None else capacity_wh * J_PER_WH
        self.resident_mb = 0.0
        self.peak_resident_mb = 0.0
        self.up = True
        self.state = "idle"
        self.label = ""
        self._since_ms = env.now
        self.energy_j = {state: 0.0 for state in POWER_STATES}
        self.time_ms = {state: 0.0 for state in POWER_STATES}
        self.intervals: list[Interval] = []
        self.record_intervals = False
        self._drain_timer: simpy.Timeout | None = None  # the one pending timer (or None)
        self._drain_timer_ms = math.inf  # when it fires
        self._empty_at_ms = math.inf  # when the battery empties at the present power
        self.drain_until_ms = drain_until_ms  # the run ends by then: no battery timer past it
        self.on_leave: list[Callable[[DeviceLeft], None]] = []
        self.on_empty: list[Callable[[], None]] = []  # the battery ran empty (up or away)
        self.host = host
        if host is not None:
            host.join(name, self._book, self._power_w["idle"], ram_mb)
        self._schedule_drain()

    # ------------------------------------------------------------ states
    def enter(self, state: str, label: str = "") -> None:
        """Switch to ``state``, booking the time and energy of the previous one."""
        host = self.host
        if host is None:
            self._book()
        else:
            host.book_all()
            host.set_power(self.name, self._power_w[state])
        self.state = state
        self.label = label
        self._schedule_drain()

    def busy(
        self, state: str, duration_ms: float, label: str = ""
    ) -> Generator[simpy.Event, object, float]:
        """Spend ``duration_ms`` in ``state``, then return to idle; return the time taken
        (on a shared host, compute is ``duration_ms`` of work on its accelerator)."""
        self.enter(state, label)
        try:
            if self.host is None or state != "compute":
                yield self.env.timeout(duration_ms)
                return duration_ms
            start_ms = self.env.now
            slowed = yield self.host.accelerator.run(duration_ms)
            return self.env.now - start_ms if slowed else duration_ms
        finally:
            self.enter("idle")

    def book_ahead(self, stretches: list[tuple[str, float, str]]) -> float:
        """Book consecutive stretches (state, milliseconds, label) from now on, as if
        entered one after another, and return their total: the caller waits that long.
        Only for a device nothing interrupts meanwhile (no battery, no availability) and
        that shares no host."""
        assert self.battery_j is None, "a battery may empty during the stretches"
        assert self.host is None, "a shared host's power depends on the other ranks"
        self._book()
        at_ms = self.env.now
        for state, duration_ms, label in stretches:
            if duration_ms > 0:
                self.energy_j[state] += self._power_w[state] * duration_ms / 1e3
                self.time_ms[state] += duration_ms
                if self.record_intervals:
                    self.intervals.append(
                        Interval(self.name, state, at_ms, at_ms + duration_ms, label)
                    )
            at_ms += duration_ms
        self.state, self.label = stretches[-1][0], stretches[-1][2]
        self._since_ms = at_ms
        return at_ms - self.env.now

    def _book(self) -> None:
        now = self.env.now
        since = self._since_ms
        elapsed = now - since
        if elapsed > 0:
            state = self.state
            power_w = self._power_w[state] if self.host is None else self.host.share_w(self.name)
            joules = power_w * elapsed / 1e3
            self.energy_j[state] += joules
            self.time_ms[state] += elapsed
            if self.battery_j is not None:
                self.battery_j -= joules
            if self.record_intervals:
                self.intervals.append(Interval(self.name, state, since, now, self.label))
        self._since_ms = now

    def start_measuring(self) -> None:
        """Forget the time, energy and intervals booked so far (after warm-up)."""
        self._book()
        self.energy_j = {state: 0.0 for state in POWER_STATES}
        self.time_ms = {state: 0.0 for state in POWER_STATES}
        self.intervals.clear()

    def close(self) -> None:
        """Book the time up to now (call at the end of a run)."""
        self._book()

    @property
    def total_energy_j(self) -> float:
        return sum(self.energy_j.values())

    # ------------------------------------------------------------ battery
    def _schedule_drain(self) -> None:
        """Note when the battery empties at the present state's power. One timer stands per
        device: a new one only when that moment comes sooner than the standing one (which
        then waits out its time and does nothing); a later moment waits for the standing
        timer, which sets itself again. Setting a timer at every change of state filled
        SimPy's queue with timers hours ahead (docs/crowd.md). A device that is away still
        drains (at the power of its state, idle), so its timer stands too; one that is away
        and empty has nothing left to drain."""
        self._empty_at_ms = math.inf
        battery_j = self.battery_j
        if battery_j is None or (battery_j <= 0 and not self.up):
            return
        power_w = self._power_w[self.state]
        if power_w <= 0:
            return
        delay_ms = max(0.0, battery_j) / power_w * 1e3
        env = self.env
        if env.now + delay_ms > self.drain_until_ms:
            return
        self._empty_at_ms = env.now + delay_ms
        if self._empty_at_ms < self._drain_timer_ms:
            self._set_drain_timer(delay_ms)

    def _set_drain_timer(self, delay_ms: float) -> None:
        timer = self._drain_timer = self.env.timeout(delay_ms)
        self._drain_timer_ms = self.env.now + delay_ms
        timer.callbacks.append(self._on_drain_timer)

    def _on_drain_timer(self, timer: simpy.Event) -> None:
        if timer is not self._drain_timer:
            return  # a sooner timer replaced it
        self._drain_timer, self._drain_timer_ms = None, math.inf
        empty_at_ms = self._empty_at_ms
        if empty_at_ms == math.inf:
            return
        if empty_at_ms > self.env.now:  # the moment moved later since it was set
            self._set_drain_timer(empty_at_ms - self.env.now)
            self._empty_at_ms = self._drain_timer_ms  # its own rounding: it fires then
            return
        self._book()
        self.battery_j = 0.0
        for callback in list(self.on_empty):
            callback()
        self.leave("battery empty")  # nothing more when it is away already

    # ------------------------------------------------------------ RAM
    def load(self, size_mb: float) -> bool:
        """Make ``size_mb`` resident; False (nothing changes) when it does not fit, on a
        shared host beside what its other ranks hold."""
        if self.resident_mb + size_mb > self.ram_mb:
            return False
        if self.host is not None and not self.host.load(size_mb):
            return False
        self.resident_mb += size_mb
        self.peak_resident_mb = max(self.peak_resident_mb, self.resident_mb)
        return True

    def unload(self, size_mb: float) -> None:
        if self.host is not None:
            self.host.unload(min(size_mb, self.resident_mb))
        self.resident_mb = max(0.0, self.resident_mb - size_mb)

    # ------------------------------------------------------------ leaving
    def leave(self, reason: str) -> None:
        """The device goes away: notify its users (who interrupt their processes)."""
        if not self.up:
            return
        self.enter("idle")
        self.up = False
        cause = DeviceLeft(self.name, reason)
        for callback in list(self.on_leave):
            callback(cause)

    @property
    def drained(self) -> bool:
        return self.battery_j is not None and self.battery_j <= 0

    def rejoin(self) -> None:
        if not self.drained:
            self.up = True
            self.enter("idle")

    def availability(
        self, spec: Availability, rng: np.random.Generator
    ) -> Generator[simpy.Event, object, None]:
        """Renewal process: up for a drawn time, down for a drawn time, repeat."""
        if not spec.start_up:
            self.leave("not available at start")
        while True:
            if self.up:
                yield self.env.timeout(draw_ms(spec.up, rng))
                self.leave("went away")
            elif self.drained:
                return
            else:
                yield self.env.timeout(draw_ms(spec.down, rng))
                self.rejoin()


def draw_ms(
    dist: ConstantDist | ExponentialDist | WeibullDist | LognormalDist, rng: np.random.Generator
) -> float:
    """One draw from a scenario distribution, in milliseconds; inf for a draw beyond what a
    float holds (a lognormal's sigma of 1e308): a time that never comes, said without
    numpy's overflow warning on stderr."""
    if isinstance(dist, ConstantDist):
        seconds = dist.value_s
    elif isinstance(dist, ExponentialDist):
        seconds = rng.exponential(dist.mean_s)
    elif isinstance(dist, WeibullDist):
        seconds = dist.scale_s * rng.weibull(dist.shape)
    else:
        with np.errstate(over="ignore"):
            seconds = dist.median_s * float(np.exp(rng.normal(0.0, dist.sigma)))
    return float(seconds) * 1e3
