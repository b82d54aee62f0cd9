"""Offline optimum of a small crowd job: the best task-to-phone assignment, found exhaustively.

The model is the foreman's protocol for one job, as the crowd twin runs it:
at submission every phone loads the first stage (the broadcast; in the twin a
cold one downloads it over the shared medium, simulated with its ``Channel``);
a task (i, s) on a phone makes its stage resident (unload, then a warm load,
after a download if the partition is not on storage), receives its input, runs
and sends its result. Streaming: (i, s+1) waits for (i, s); barrier: for all of stage s.
The job ends when the last result is in, plus the aggregation.

Two optima: with ``prefetch=True`` a phone may load its next stage as soon as
it is free; with ``prefetch=False`` only when its task is dispatched. The twin,
like the real foreman, gives a first-stage task to a phone still loading it and
prefetches only by the foreman's JIT rule (an idle phone whose stage has no work
left loads a released stage), so the first optimum bounds it from below and the
second may be beaten by it. Transfers after the broadcast never share the
medium. Churn, noise and out-of-memory retries are not modelled (phones whose
session does not fit a stage are never given it). The search enumerates, branch
and bound, every list of (stage, phone) decisions whose completions do not
decrease; inputs are identical, so a stage's next task is the ready input whose
upstream result came first. ``build_instance`` takes the costs from the twin;
``emu_costs.measured_instance`` from the records of emulator runs.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import numpy as np
import simpy

from edgetwin.crowd_fleet import expand_fleet
from edgetwin.models import registry
from edgetwin.profile import NetworkParams
from edgetwin.scenario import Scenario
from edgetwin.sim.crowd.costs import (
    aggregation_ms,
    blob_bytes,
    inference_ms,
    task_input_bytes,
    task_output_bytes,
    warm_load_ms,
)
from edgetwin.sim.crowd.runner import CrowdSetup
from edgetwin.sim.network import Network

TIE_MS = 1e-9  # completions this close count as simultaneous

Task = tuple[int, int]  # (input, stage)
Assignment = tuple[tuple[Task, ...], ...]  # per phone, the tasks it runs in order


@dataclass(frozen=True)
class PhoneCosts:
    """One phone's costs in the offline model, ms (per stage where indexed)."""

    name: str
    kind: str  # class name: phones of one class with equal state are interchangeable
    warm_load_ms: tuple[float, ...]  # per stage: load from storage
    download_ms: tuple[float, ...]  # a cold load's download alone on the medium
    work_ms: tuple[float, ...]  # receive the input, run, send the result
    fits: tuple[bool, ...]  # the stage's session fits the phone's budget
    broadcast_ms: float  # when the first stage is resident after submission
    broadcast_cold: bool
    cache_mb: float


@dataclass(frozen=True)
class Instance:
    """A job on a fleet, as the offline model sees it."""

    phones: tuple[PhoneCosts, ...]
    inputs: int
    stage_mb: tuple[float, ...]
    barrier: bool
    aggregation_ms: float
    cached_at_start: bool
    task_bytes: tuple[int, ...]  # input + result bytes of a task, per stage
    blob_bytes: tuple[int, ...]

    @property
    def stages(self) -> int:
        return len(self.stage_mb)


@dataclass(frozen=True)
class Schedule:
    """An assignment's outcome in the offline model."""

    assignment: Assignment
    makespan_ms: float
    cold_loads: int
    warm_loads: int
    evictions: int
    bytes_moved: int


@dataclass(frozen=True)
class Optimum:
    """The best schedule found, and whether the search finished (proved optimal)."""

    schedule: Schedule
    proved: bool
    nodes: int


def _channel_runs(
    scenario: Scenario, stacks: dict[str, NetworkParams], flows: dict[str, tuple[float, float]]
) -> dict[str, float]:
    """End times (ms) of concurrent sends from t=0: name -> (overhead_ms, bytes) on the twin's
    network, each send paying latency + overhead first as ``Phone`` does."""
    env = simpy.Environment()
    network = Network(env, scenario.network, scenario.network.bandwidth_mbps, stacks)
    ends: dict[str, float] = {}

    def send(name: str, overhead_ms: float, nbytes: float) -> Generator[simpy.Event, object, None]:
        yield env.timeout(scenario.network.latency_ms + overhead_ms)
        yield network.channels[name].send(nbytes, stacks[name].bandwidth_efficiency)
        ends[name] = env.now

    for name, (overhead_ms, nbytes) in flows.items():
        env.process(send(name, overhead_ms, nbytes))
    env.run()
    return ends


def build_instance(scenario: Scenario, setup: CrowdSetup, strategy: str) -> Instance:
    """The offline model of one job of a crowd scenario, costs from the twin's functions."""
    crowd = scenario.crowd
    assert crowd is not None
    job = crowd.job
    phones = expand_fleet(crowd, setup.classes, np.random.default_rng(0))
    stacks = {p.name: NetworkParams(**p.phone_class.profile.network.model_dump()) for p in phones}
    cold = crowd.cache == "cold"
    first = job.stages[0]
    # a warm cache holds no stage larger than the phone's storage: that one is downloaded
    downloads = [p for p in phones if cold or first.size_mb > p.phone_class.profile.cache_mb]
    broadcast = _channel_runs(
        scenario,
        stacks,
        {
            p.name: (p.phone_class.profile.network.message_overhead_ms, blob_bytes(first))
            for p in downloads
        },
    )
    costs = []
    for p in phones:
        profile = p.phone_class.profile
        overhead = profile.network.message_overhead_ms

        def alone_ms(nbytes: float, name: str = p.name, overhead: float = overhead) -> float:
            return _channel_runs(scenario, stacks, {name: (overhead, nbytes)})[name]

        costs.append(
            PhoneCosts(
                name=p.name,
                kind=p.phone_class.spec.name,
                warm_load_ms=tuple(warm_load_ms(profile, s) for s in job.stages),
                download_ms=tuple(alone_ms(blob_bytes(s)) for s in job.stages),
                work_ms=tuple(
                    alone_ms(task_input_bytes(job, k))
                    + inference_ms(profile, s)
                    + alone_ms(task_output_bytes(job, k))
                    for k, s in enumerate(job.stages)
                ),
                fits=tuple(p.phone_class.holds(s) for s in job.stages),
                broadcast_ms=broadcast.get(p.name, 0.0) + warm_load_ms(profile, first),
                broadcast_cold=p.name in broadcast,
                cache_mb=profile.cache_mb,
            )
        )
    return Instance(
        phones=tuple(costs),
        inputs=job.inputs,
        stage_mb=tuple(s.size_mb for s in job.stages),
        barrier=registry.pipeline(strategy) == "barrier",
        aggregation_ms=aggregation_ms(job),
        cached_at_start=not cold,
        task_bytes=tuple(
            task_input_bytes(job, k) + task_output_bytes(job, k) for k in range(len(job.stages))
        ),
        blob_bytes=tuple(round(blob_bytes(s)) for s in job.stages),
    )


class _State:
    """A partial schedule; ``place`` returns a new state with one more task."""

    __slots__ = (
        "assignment",
        "cached",
        "counts",
        "free",
        "item_ms",
        "last_ms",
        "next_stage",
        "resident",
        "stage_left",
        "stage_ms",
    )

    def __init__(self, inst: Instance) -> None:
        n, stages = inst.inputs, inst.stages
        self.free = [p.broadcast_ms for p in inst.phones]
        self.resident = [0] * len(inst.phones)
        start: tuple[int, ...] = tuple(range(stages)) if inst.cached_at_start else (0,)
        self.cached = [_lru(start, (), inst, p) for p in inst.phones]
        self.next_stage = [0] * n
        self.item_ms = [0.0] * n
        self.stage_left = [n] * stages
        self.stage_ms = [0.0] * stages
        self.last_ms = 0.0
        cold = sum(p.broadcast_cold for p in inst.phones)
        self.counts = [cold, len(inst.phones) - cold, 0, n * sum(inst.task_bytes)]
        self.counts[3] += cold * inst.blob_bytes[0]
        self.assignment: list[tuple[Task, ...]] = [() for _ in inst.phones]

    def copy(self) -> _State:
        new = _State.__new__(_State)
        for slot in _State.__slots__:
            value = getattr(self, slot)
            setattr(new, slot, list(value) if isinstance(value, list) else value)
        return new

    def item_for(self, inst: Instance, stage: int) -> int | None:
        """The ready input of ``stage`` whose upstream result came first (None: none ready)."""
        if inst.barrier and stage > 0 and self.stage_left[stage - 1]:
            return None
        ready = [i for i, s in enumerate(self.next_stage) if s == stage]
        return min(ready, key=lambda i: (self.item_ms[i], i)) if ready else None

    def place(self, inst: Instance, item: int, phone: int, prefetch: bool) -> _State:
        stage = self.next_stage[item]
        p = inst.phones[phone]
        ready = self.item_ms[item] if stage else 0.0
        if inst.barrier and stage:
            ready = self.stage_ms[stage - 1]
        new = self.copy()
        start = new.free[phone] if prefetch else max(new.free[phone], ready)
        if new.resident[phone] != stage:
            cold = stage not in new.cached[phone]
            start += p.warm_load_ms[stage] + (p.download_ms[stage] if cold else 0.0)
            new.counts[0 if cold else 1] += 1
            new.counts[2] += new.resident[phone] >= 0
            new.counts[3] += inst.blob_bytes[stage] if cold else 0
            new.resident[phone] = stage
        new.cached[phone] = _lru((stage,), new.cached[phone], inst, p)
        end = max(start, ready) + p.work_ms[stage]
        new.free[phone] = new.item_ms[item] = end
        new.next_stage[item] += 1
        new.stage_left[stage] -= 1
        new.stage_ms[stage] = max(new.stage_ms[stage], end)
        new.last_ms = end
        new.assignment[phone] = (*new.assignment[phone], (item, stage))
        return new

    def done(self, inst: Instance) -> bool:
        return not any(self.stage_left)

    def schedule(self, inst: Instance) -> Schedule:
        return Schedule(
            tuple(self.assignment),
            max(self.item_ms) + inst.aggregation_ms,
            *self.counts,
        )


def _lru(
    used: tuple[int, ...], cached: tuple[int, ...], inst: Instance, phone: PhoneCosts
) -> tuple[int, ...]:
    """Storage after ``used`` stages are touched, least recently used first (as ``Phone``)."""
    order = list(cached)
    for stage in used:
        if inst.stage_mb[stage] > phone.cache_mb:
            continue
        if stage in order:
            order.remove(stage)
        order.append(stage)
        while sum(inst.stage_mb[s] for s in order) > phone.cache_mb:
            order.pop(0)
    return tuple(order)


def evaluate_assignment(inst: Instance, assignment: Assignment, prefetch: bool = False) -> Schedule:
    """A fixed assignment (per phone, its tasks in order) timed in the offline model."""
    state = _State(inst)
    position = [0] * len(assignment)
    remaining = sum(len(tasks) for tasks in assignment)
    while remaining:
        progressed = False
        for phone, tasks in enumerate(assignment):
            if position[phone] == len(tasks):
                continue
            item, stage = tasks[position[phone]]
            if state.next_stage[item] != stage or (
                inst.barrier and stage and state.stage_left[stage - 1]
            ):
                continue
            state = state.place(inst, item, phone, prefetch)
            position[phone] += 1
            remaining -= 1
            progressed = True
        if not progressed:
            raise ValueError("the assignment's task order is not feasible")
    return state.schedule(inst)


def _lower_bound_ms(inst: Instance, state: _State) -> float:
    """No schedule from ``state`` ends earlier: each input's remaining work on the fastest phone."""
    fastest = [min(p.work_ms[s] for p in inst.phones if p.fits[s]) for s in range(inst.stages)]
    bound = max(state.item_ms[i] + sum(fastest[state.next_stage[i] :]) for i in range(inst.inputs))
    return bound + inst.aggregation_ms


def _phone_key(inst: Instance, state: _State, phone: int) -> tuple[object, ...]:
    return (
        inst.phones[phone].kind,
        state.free[phone],
        state.resident[phone],
        state.cached[phone],
    )


def optimum(inst: Instance, node_limit: int = 2_000_000, prefetch: bool = True) -> Optimum:
    """The assignment with the smallest makespan, by branch and bound. Past ``node_limit``
    nodes the search stops once it has a schedule (the best found, not proved); it used to
    stop before its first one too, and had none to give."""
    best: list[Schedule | None] = [None]
    nodes = [0]
    infeasible = [s for s in range(inst.stages) if not any(p.fits[s] for p in inst.phones)]
    if infeasible:
        raise ValueError(f"stage {infeasible[0]} fits no phone")

    def search(state: _State) -> None:
        nodes[0] += 1
        if nodes[0] > node_limit and best[0] is not None:
            return
        if state.done(inst):
            found = state.schedule(inst)
            current = best[0]
            if current is None or found.makespan_ms < current.makespan_ms - TIE_MS:
                best[0] = found
            return
        current = best[0]
        if current is not None and _lower_bound_ms(inst, state) >= current.makespan_ms - TIE_MS:
            return
        children = []
        for stage in range(inst.stages):
            item = state.item_for(inst, stage)
            if item is None:
                continue
            seen = set()
            for phone, costs in enumerate(inst.phones):
                key = _phone_key(inst, state, phone)
                if not costs.fits[stage] or key in seen:
                    continue
                seen.add(key)
                child = state.place(inst, item, phone, prefetch)
                if child.last_ms >= state.last_ms - TIE_MS:
                    children.append(child)
        children.sort(key=lambda c: c.last_ms)
        for child in children:
            search(child)

    search(_State(inst))
    found = best[0]
    assert found is not None
    return Optimum(found, nodes[0] <= node_limit, nodes[0])
