"""A volunteer phone running the worker app: residency, storage cache and the work it does.

The phone's power states, battery and RAM are a generic ``Device``; this
module adds what a CROWDio worker is: at most one resident ONNX session
(loading another stage unloads the resident one first), partitions cached on
storage (least recently used go first), and the pieces of work the foreman
asks for (load a stage, receive a task's input, run it, send the result).
Like the worker app on its connection, a phone handles the foreman's
instructions (``LoadStage``, ``RunTask``) one after the other from its
inbox, in one SimPy process the foreman owns; a phone that leaves interrupts
it.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import NamedTuple

import simpy

from edgetwin.crowd_spec import StageSpec
from edgetwin.models.crowd.table import Task, waited_load_ms
from edgetwin.phone_profile import PhoneProfile
from edgetwin.profile import J_PER_WH, DeviceProfile, battery_wh
from edgetwin.sim.crowd.costs import blob_bytes, inference_ms, warm_load_ms
from edgetwin.sim.crowd.records import Recorder
from edgetwin.sim.crowd.tasks import Job
from edgetwin.sim.device import Device
from edgetwin.sim.network import Channel


class OutOfMemory(Exception):
    """A stage's session did not fit the phone's free RAM."""


class PhoneDevice(Device):
    """A ``Device`` that also tells its users when it comes back."""

    def __init__(
        self, env: simpy.Environment, name: str, profile: DeviceProfile, end_ms: float
    ) -> None:
        super().__init__(env, name, profile, profile.ram_mb, drain_until_ms=end_ms)
        self.on_rejoin: list[Callable[[], None]] = []

    def rejoin(self) -> None:
        was_up = self.up
        super().rejoin()
        if self.up and not was_up:
            for callback in list(self.on_rejoin):
                callback()


class Load(NamedTuple):
    """What making a stage resident took (the instructions and this are named tuples: one
    is made for every load and task, cheaper than a frozen dataclass)."""

    cold: bool
    evicted: bool
    duration_ms: float
    peak_mb: float


class LoadStage(NamedTuple):
    """UNLOAD_MODEL of the resident stage, then LOAD_MODEL of ``stage``."""

    stage: StageSpec
    job: Job
    item: int | None  # the task it is loaded for; None: the broadcast or a JIT load
    why: str  # "task", "broadcast" or "deferred_load"


class RunTask(NamedTuple):
    """RUN_TASK: the task's input in, one inference, its result out."""

    task: Task


Instruction = LoadStage | RunTask


FOREMAN_STATION = "foreman"  # whose airtime the foreman's sends take on a shared medium


@dataclass(frozen=True)
class Link:
    """The phone's path to the foreman: its channel, latency and network stack."""

    channel: Channel
    latency_ms: float
    overhead_ms: float
    efficiency: float


class Phone:
    """One worker phone, driven by the foreman."""

    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        profile: PhoneProfile,
        device_profile: DeviceProfile,
        end_ms: float,
        link: Link,
        noise: Callable[[], float],
        load_noise: Callable[[], float],
        recorder: Recorder,
    ) -> None:
        self.env = env
        self.name = name
        self.profile = profile
        self.device = PhoneDevice(env, name, device_profile, end_ms)
        self.link = link
        self.noise = noise
        self.load_noise = load_noise
        self.recorder = recorder
        battery = profile.battery
        self.capacity_j = battery_wh(battery.capacity_mah, battery.voltage_v) * J_PER_WH
        self.resident: StageSpec | None = None  # the session it holds now
        self.cached: OrderedDict[str, float] = OrderedDict()  # least recently used first
        self.cached_stages: frozenset[str] = frozenset()  # its keys, for the foreman's facts
        self.inbox: deque[Instruction] = deque()  # the foreman's instructions, handled in order
        self.process: simpy.Process | None = None  # handling the inbox
        self.last_load_ms = 0.0  # the last load, reported with the next task (as a worker does)
        self.last_load_end_ms = 0.0
        self.loads = {"cold": 0, "warm": 0}
        self.emptied_at_j: float | None = None  # energy drawn when the battery ran empty
        self.device.on_empty.append(self._note_empty)

    # ------------------------------------------------------------ state
    @property
    def budget_mb(self) -> float:
        return self.device.ram_mb

    def set_battery_level(self, level_pct: float) -> None:
        self.device.battery_j = self.capacity_j * level_pct / 100.0
        self.device.enter("idle")  # books nothing yet; reschedules the drain from this level

    def battery_pct(self) -> float:
        self.device.close()
        return max(0.0, self.device.battery_j or 0.0) / self.capacity_j * 100.0

    def energy_j(self) -> float:
        """Energy drawn since the start of the run, up to now (an empty phone draws no more)."""
        if self.emptied_at_j is not None:
            return self.emptied_at_j
        self.device.close()
        return self.device.total_energy_j

    def _note_empty(self) -> None:
        """The battery ran empty (working, or away at idle power): all it had is drawn."""
        self.emptied_at_j = self.device.total_energy_j

    def fill_cache(self, stages: tuple[StageSpec, ...]) -> None:
        """Partitions already on storage at the start (a warm run)."""
        for stage in stages:
            self._cache(stage)

    def lose_session(self) -> None:
        """The app was stopped (the phone left): nothing stays resident; storage stays."""
        self.resident = None
        self.device.unload(self.device.resident_mb)
        self.recorder.session_ram(self.name, 0.0)

    # ------------------------------------------------------------ work
    def make_resident(
        self, stage: StageSpec, job: int | None, item: int | None
    ) -> Generator[simpy.Event, object, Load | None]:
        """UNLOAD the resident stage, then LOAD ``stage`` (downloading it if not cached).

        Returns None when ``stage`` was already resident; raises OutOfMemory
        when its session does not fit.
        """
        if self.resident is stage:
            self.use(stage)
            return None
        start = self.env.now
        record = self.recorder if self.recorder.enabled else None  # most runs record nothing
        held = self.resident
        evicted = held is not None
        if held is not None:
            if record:
                record.event(self.name, "unload", job, item, held.name)
            self.lose_session()
        cold = stage.name not in self.cached
        if record:
            record.event(self.name, "load_cold" if cold else "load_warm", job, item, stage.name)
            record.begin(self.name, "load", job, item, stage.name, "cold" if cold else "warm")
        self.device.enter("load", stage.name)
        try:
            if cold:
                yield self.env.timeout(self.link.latency_ms + self.link.overhead_ms)
                yield from self._send(blob_bytes(stage), FOREMAN_STATION)
                self._cache(stage)
            else:
                self.cached.move_to_end(stage.name)
            peak_mb = stage.peak_mb
            if not self.device.load(peak_mb):
                if record:
                    record.event(self.name, "out_of_memory", job, item, stage.name)
                raise OutOfMemory(stage.name)
            if record:
                record.session_ram(self.name, self.device.resident_mb)
            yield self.env.timeout(warm_load_ms(self.profile, stage) * self.load_noise())
            self.device.unload(peak_mb - stage.ram_mb)
            self.resident = stage
            if record:
                record.session_ram(self.name, self.device.resident_mb)
        finally:
            if record:
                record.end(self.name, "load")
                record.level(self.name, self.battery_pct())
        if record:
            record.event(self.name, "loaded", job, item, stage.name)
        self.loads["cold" if cold else "warm"] += 1
        return Load(cold, evicted, self.env.now - start, peak_mb)

    def note_load(self, duration_ms: float) -> None:
        """A load (0: the stage was resident) just ended; the next task reports it."""
        self.last_load_ms, self.last_load_end_ms = duration_ms, self.env.now

    def take_load_ms(self, ready_ms: float) -> float:
        """The part of the last load after ``ready_ms`` (when the task it precedes became
        ready: the wait the task's input had for it), and forget the load."""
        waited_ms = waited_load_ms(self.last_load_ms, self.last_load_end_ms, ready_ms)
        self.last_load_ms = 0.0
        return waited_ms

    def use(self, stage: StageSpec) -> None:
        """The resident session is used: its partition is the most recently used one."""
        if stage.name in self.cached:
            self.cached.move_to_end(stage.name)

    def transfer(
        self, nbytes: int, direction: str, job: int, item: int, stage: str
    ) -> Generator[simpy.Event, object, float]:
        """Receive a task's input (``in``) or send its result (``out``); returns ms taken."""
        env, link = self.env, self.link
        start = env.now
        recorder = self.recorder
        if recorder.enabled:
            recorder.begin(self.name, "transfer", job, item, stage, direction)
        self.device.enter("comm", direction)
        try:
            yield env.timeout((link.latency_ms + link.overhead_ms) * self.noise())
            yield from self._send(nbytes, self.name if direction == "out" else FOREMAN_STATION)
        finally:
            if recorder.enabled:
                recorder.end(self.name, "transfer")
        return self.env.now - start

    def _send(self, nbytes: float, station: str) -> Generator[simpy.Event, object, None]:
        """Move ``nbytes`` over the phone's link, sent by ``station`` (the phone or the
        foreman); a phone that leaves meanwhile stops the transfer at that instant, and
        its share of the link (or of the shared medium's airtime) goes to the other flows."""
        sent = self.link.channel.send(nbytes, self.link.efficiency, station=station)
        try:
            yield sent
        except simpy.Interrupt:
            self.link.channel.cancel(sent)
            raise

    def infer(self, stage: StageSpec, job: int, item: int) -> Generator[simpy.Event, object, float]:
        """Run one input through the resident session; returns ms taken."""
        start = self.env.now
        recorder = self.recorder
        if recorder.enabled:
            recorder.event(self.name, "infer", job, item, stage.name)
            recorder.begin(self.name, "infer", job, item, stage.name)
        self.device.enter("compute", stage.name)
        try:
            yield self.env.timeout(inference_ms(self.profile, stage) * self.noise())
        finally:
            if recorder.enabled:
                recorder.end(self.name, "infer")
        return self.env.now - start

    def _cache(self, stage: StageSpec) -> None:
        """Keep a downloaded partition on storage, dropping the least recently used."""
        if stage.size_mb > self.profile.cache_mb:
            return
        self.cached[stage.name] = stage.size_mb
        self.cached.move_to_end(stage.name)
        while sum(self.cached.values()) > self.profile.cache_mb:
            self.cached.popitem(last=False)
        self.cached_stages = frozenset(self.cached)
