"""Run a crowd scenario: one SimPy environment per strategy, scheduler and repetition.

Each run builds the phones, the shared network and the foreman, submits jobs
as the arrival process says, and ends when every job that arrived before
``horizon_s`` is finished (or ``drain_s`` later). It returns one results row
per job. Random streams are split so that every bandwidth, strategy and
scheduler of a repetition sees the same phones, the same churn and the same job
arrivals.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

import numpy as np
import simpy

from edgetwin.configuration import CrowdRun, crowd_runs, run_label
from edgetwin.crowd_fleet import PhoneClass, expand_fleet, resolve_fleet
from edgetwin.crowd_spec import CROWD_STRATEGIES
from edgetwin.errors import InputError
from edgetwin.models import registry
from edgetwin.network_spec import BandwidthStep
from edgetwin.number_text import exact_text
from edgetwin.phone_profile import device_profile
from edgetwin.policies.scheduling import SCHEDULERS, check_schedulers, make_scheduler
from edgetwin.profile import NetworkParams, mah_from_joules
from edgetwin.progress import Step, naming
from edgetwin.results import STATUS_OK, ResultRow
from edgetwin.run_failures import INCOMPLETE
from edgetwin.scenario import Scenario
from edgetwin.schema import referenced_file
from edgetwin.sim.crowd.availability import Absence, read_trace, replay
from edgetwin.sim.crowd.costs import lognormal_factor
from edgetwin.sim.crowd.foreman import Foreman
from edgetwin.sim.crowd.phone import Link, Phone
from edgetwin.sim.crowd.records import (
    Activity,
    BatterySample,
    RamSample,
    Recorder,
    TraceEvent,
    with_idle,
)
from edgetwin.sim.crowd.tasks import Job
from edgetwin.sim.device import draw_ms
from edgetwin.sim.intervals import not_known_intervals
from edgetwin.sim.network import Network

FLEET, ARRIVALS, AVAILABILITY, DYNAMICS = range(4)  # random streams of a repetition


@dataclass(frozen=True)
class CrowdSetup:
    """What a crowd scenario needs from files: phone profiles and the availability trace."""

    classes: list[PhoneClass]
    absences: dict[str, list[Absence]]


@dataclass(frozen=True)
class PhoneSummary:
    """One phone over a whole run."""

    phone: str
    phone_class: str
    peak_session_mb: float
    drawn_mah: float
    cold_loads: int
    warm_loads: int
    tasks_done: int
    battery_empty: bool


@dataclass(frozen=True)
class CrowdOutcome:
    """Rows plus what the twin saw on the way (records when asked for)."""

    run: CrowdRun
    rows: list[ResultRow]
    jobs: list[Job]
    phones: list[PhoneSummary]
    recorder: Recorder
    events_scheduled: int
    end_s: float
    unplayed_steps: tuple[BandwidthStep, ...]  # network.schedule steps the run ended before


def prepare_crowd(scenario: Scenario, scenario_path: Path | None) -> CrowdSetup:
    """Resolve profiles, schedulers and the availability trace; errors name the field."""
    crowd = scenario.crowd
    if crowd is None:
        raise InputError(scenario_path, "crowd", "the scenario has no 'crowd' section")
    check_schedulers(crowd.schedulers, scenario_path)
    classes = resolve_fleet(crowd, scenario_path)
    absences: dict[str, list[Absence]] = {}
    if crowd.availability_trace is not None:
        base = Path.cwd() if scenario_path is None else scenario_path.resolve().parent
        named_by = scenario_path or f"<scenario {scenario.name}>"
        field = "crowd.availability_trace"
        trace = referenced_file(crowd.availability_trace, base, named_by, field)
        names = {p.name for p in expand_fleet(crowd, classes, np.random.default_rng(0))}
        absences = read_trace(trace, names)
    return CrowdSetup(classes, absences)


def run_crowd(
    scenario: Scenario,
    scenario_path: Path | None,
    on_progress: Step | None = None,
    unplayed: list[tuple[BandwidthStep, ...]] | None = None,
) -> list[ResultRow]:
    """Every run of a crowd scenario; one row per job, in run order then job order;
    ``on_progress`` is told each run as it ends (its ``run_label`` if it takes one);
    ``unplayed``, if given, gets each run's ``CrowdOutcome.unplayed_steps``, one per run.

    With ``intervals``, every metric's band is "not known": a phone profile keeps no
    held-out residuals and no bootstrap (docs/calibration.md, "Prediction intervals")."""
    setup = prepare_crowd(scenario, scenario_path)
    rows: list[ResultRow] = []
    advance = naming(on_progress)
    for run in crowd_runs(scenario):
        outcome = simulate_crowd(scenario, setup, run)
        if unplayed is not None:
            unplayed.append(outcome.unplayed_steps)
        jobs = outcome.rows
        del outcome  # its jobs and phones go before the next run, as they did
        rows.extend(jobs if scenario.intervals is None else map(not_known_intervals, jobs))
        advance(run_label(run))
    return rows


def _stream(scenario: Scenario, run: CrowdRun, *keys: int) -> np.random.Generator:
    """``default_rng`` of the seed sequence, built directly (one per phone: 100,000 of them)."""
    seeds = np.random.SeedSequence([scenario.seed, run.rep, *keys])
    return np.random.Generator(np.random.PCG64(seeds))


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off (it rescans every live phone and event).

    A run makes little cyclic garbage (its peak RSS is the same with the
    collector off); what it makes is collected once the collector is back on.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@collector_paused()
def simulate_crowd(
    scenario: Scenario, setup: CrowdSetup, run: CrowdRun, record: bool = False
) -> CrowdOutcome:
    """One run in a fresh environment, the cyclic garbage collector paused."""
    crowd = scenario.crowd
    assert crowd is not None
    env = simpy.Environment()
    end_ms = (crowd.horizon_s + crowd.drain_s) * 1e3
    recorder = Recorder(env, record)
    # keyed by the registries' order, not the scenario's lists: a run's streams do not
    # depend on what else the scenario runs (a plan runs its question's scheduler alone)
    strategy_index = CROWD_STRATEGIES.index(run.strategy)
    scheduler_index = list(SCHEDULERS).index(run.scheduler)
    dynamics = _stream(scenario, run, DYNAMICS, strategy_index, scheduler_index)
    setups = expand_fleet(crowd, setup.classes, _stream(scenario, run, FLEET))
    stack = {c.spec.name: NetworkParams(**c.profile.network.model_dump()) for c in setup.classes}
    stacks = {s.name: stack[s.phone_class.spec.name] for s in setups}
    network = Network(env, scenario.network, run.bandwidth_mbps, stacks)
    noise = lognormal_factor(dynamics, scenario.noise_cv)
    devices = {c.spec.name: device_profile(c.profile, c.spec.ram_mb) for c in setup.classes}
    phones = []
    for phone_setup in setups:
        profile = phone_setup.phone_class.profile
        link = Link(
            network.channels[phone_setup.name],
            scenario.network.latency_ms,
            profile.network.message_overhead_ms,
            profile.network.bandwidth_efficiency,
        )
        load_noise = lognormal_factor(dynamics, profile.session.load_cv)
        phone = Phone(
            env,
            phone_setup.name,
            profile,
            devices[phone_setup.phone_class.spec.name],
            end_ms,
            link,
            noise,
            load_noise,
            recorder,
        )
        phone.set_battery_level(phone_setup.battery_start_pct)
        if crowd.cache == "warm":
            phone.fill_cache(crowd.job.stages)
        recorder.session_ram(phone.name, 0.0)
        recorder.level(phone.name, phone.battery_pct())
        phones.append(phone)
    stop = env.event()
    arrivals_over = [False]

    def job_finished(_job: Job) -> None:
        if arrivals_over[0] and all(j.finished for j in foreman.jobs) and not stop.triggered:
            stop.succeed()

    foreman = Foreman(
        env,
        crowd.job,
        registry.pipeline(run.strategy),
        make_scheduler(run.scheduler),
        phones,
        dynamics,
        recorder,
        job_finished,
        None if crowd.task_deadline_s is None else crowd.task_deadline_s * 1e3,
    )
    for k, (phone, phone_setup) in enumerate(zip(phones, setups, strict=True)):
        availability = phone_setup.phone_class.spec.availability
        if availability is not None:
            churn = _stream(scenario, run, AVAILABILITY, k)
            env.process(phone.device.availability(availability, churn))
        if phone.name in setup.absences:
            env.process(replay(env, phone.device, setup.absences[phone.name]))

    def arrivals() -> Generator[simpy.Event, object, None]:
        spec = crowd.job
        gaps = _stream(scenario, run, ARRIVALS)
        yield env.timeout(spec.first_at_s * 1e3)
        while True:
            foreman.submit()
            if spec.interarrival is None:
                break
            yield env.timeout(draw_ms(spec.interarrival, gaps))
            if env.now >= crowd.horizon_s * 1e3:
                break
        arrivals_over[0] = True
        job_finished(foreman.jobs[-1])

    def deadline() -> Generator[simpy.Event, object, None]:
        yield env.timeout(end_ms)
        if not stop.triggered:
            stop.succeed()

    env.process(arrivals())
    env.process(deadline())
    env.run(until=stop)
    recorder.end_all()
    for phone in phones:
        phone.device.close()
    voltage_v = {phone.name: phone.profile.battery.voltage_v for phone in phones}
    reasons = foreman.unfinished_reasons()
    rows = [
        _row(scenario, run, job, len(phones), voltage_v, reasons.get(job.job_id))
        for job in foreman.jobs
    ]
    return CrowdOutcome(
        run,
        rows,
        foreman.jobs,
        [
            _summary(phone, s.phone_class.spec.name, foreman.tasks_done(phone.name))
            for phone, s in zip(phones, setups, strict=True)
        ],
        recorder,
        next(env._eid),  # SimPy numbers the events it schedules from 0: this is their count
        env.now / 1e3,
        network.unplayed_steps(),
    )


def _summary(phone: Phone, phone_class: str, tasks_done: int) -> PhoneSummary:
    return PhoneSummary(
        phone.name,
        phone_class,
        phone.device.peak_resident_mb,
        mah_from_joules(phone.energy_j(), phone.profile.battery.voltage_v),
        phone.loads["cold"],
        phone.loads["warm"],
        tasks_done,
        phone.device.drained,
    )


def _row(
    scenario: Scenario,
    run: CrowdRun,
    job: Job,
    devices: int,
    voltage_v: dict[str, float],
    unfinished_reason: str | None,
) -> ResultRow:
    """A job's row: latency and, along its critical input, inference, loads and transfers;
    an unfinished job's status says why."""
    spec = job.spec
    ok = job.finished_ms is not None
    nan = math.nan
    compute_ms = load_ms = comm_ms = total_ms = energy_j = nan
    battery_mah: float | None = None
    if job.finished_ms is not None:
        total_ms = job.finished_ms - job.submitted_ms
        chain = max(job.tasks, key=lambda tasks: tasks[-1].done_ms)
        compute_ms = sum(task.infer_ms for task in chain)
        load_ms = sum(task.load_ms for task in chain)
        comm_ms = sum(task.comm_ms for task in chain)
        energy_j = sum(job.energy_j.values())
        battery_mah = fmean(mah_from_joules(j, voltage_v[n]) for n, j in job.energy_j.items())
    items_done = job.items_done
    status = STATUS_OK
    if not ok:
        status = f"{INCOMPLETE}: {items_done} of {spec.inputs} inputs done; {unfinished_reason}"
    participants = max(1, len(job.energy_start_j))
    return ResultRow(
        scenario=scenario.name,
        mode="twin",
        strategy=run.strategy,
        devices=devices,
        batch=spec.inputs,
        bandwidth_mbps=run.bandwidth_mbps,
        cr=None,
        segments=None,
        rep=run.rep,
        compute_ms=compute_ms,
        staging_ms=0.0 if ok else nan,  # phones have no staging phase; loads are load_ms
        comm_ms=comm_ms,
        total_ms=total_ms,
        per_sample_ms=total_ms / spec.inputs,
        energy_j=energy_j,
        status=status,
        bytes_sent=job.bytes_sent,
        gflops_per_device=job.gflops / participants,
        inputs=spec.inputs,
        load_ms=load_ms,
        stages=len(spec.stages),
        scheduler=run.scheduler,
        peak_session_mb=job.peak_session_mb,
        battery_mah=battery_mah,
        cold_loads=job.cold_loads,
        warm_loads=job.warm_loads,
        evictions=job.evictions,
        bytes_moved=job.bytes_moved,
        tasks_redispatched=job.redispatched,
    )


# ---------------------------------------------------------------- timelines


@dataclass(frozen=True)
class CrowdTimeline:
    """Per-phone records of one run, for Gantt, RAM, battery and latency figures."""

    run: CrowdRun
    phones: list[str]
    activities: list[Activity]  # load, infer, transfer, idle, away
    ram: list[RamSample]
    battery: list[BatterySample]
    events: list[TraceEvent]
    rows: list[ResultRow]
    summaries: list[PhoneSummary]

    def records(self) -> dict[str, list[dict[str, Any]]]:
        """Everything as plain dicts (JSON-ready)."""
        return {
            "activities": [asdict(a) for a in self.activities],
            "ram": [asdict(r) for r in self.ram],
            "battery": [asdict(b) for b in self.battery],
            "events": [asdict(e) for e in self.events],
            "rows": [asdict(r) for r in self.rows],
            "phones": [asdict(p) for p in self.summaries],
        }


def crowd_timelines(
    scenario: Scenario,
    scenario_path: Path | None,
    strategy: str | None = None,
    scheduler: str | None = None,
    rep: int = 0,
    bandwidth_mbps: float | None = None,
) -> CrowdTimeline:
    """Re-run one configuration (the first that matches; None matches any) with recording
    on."""
    setup = prepare_crowd(scenario, scenario_path)
    runs = crowd_runs(scenario)
    chosen = [
        r
        for r in runs
        if (strategy is None or r.strategy == strategy)
        and (scheduler is None or r.scheduler == scheduler)
        and (bandwidth_mbps is None or r.bandwidth_mbps == bandwidth_mbps)
        and r.rep == rep
    ]
    if not chosen:
        at = "" if bandwidth_mbps is None else f" / {exact_text(bandwidth_mbps)} Mbps"
        raise InputError(
            scenario_path, "strategies", f"no run {strategy} / {scheduler}{at} / rep {rep}"
        )
    return timeline_of(simulate_crowd(scenario, setup, chosen[0], record=True))


def timeline_of(outcome: CrowdOutcome) -> CrowdTimeline:
    """The records of a run simulated with ``record=True``."""
    recorder = outcome.recorder
    names = [summary.phone for summary in outcome.phones]
    return CrowdTimeline(
        outcome.run,
        names,
        with_idle(recorder.activities, names, outcome.end_s),
        recorder.ram,
        recorder.battery,
        recorder.events,
        outcome.rows,
        outcome.phones,
    )
