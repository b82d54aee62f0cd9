"""A crowd scenario in the emulator: the real CROWDio foreman and workers on Mininet hosts.

The foreman runs on host 0, phone i's worker on host i + 1 (phones in fleet order,
named as in the twin). The foreman is a server, as in a CROWDio deployment: on dedicated
links each phone's link is shaped to the bandwidth as for ViT and the foreman's is not,
so the phones' links are the bottlenecks, as in the twin (``crowd_topology``; on the
shared medium the foreman's host is a station like the others). A phone's host
is CPU-limited by its class's speed and memory-limited to its session budget and its
worker's interpreter (``HostLimits`` from ``phone_limits``); its worker reports battery
and free RAM with its profile's power model and budget. This process submits every job
with the real SDK over the bridge. Runs go bandwidth by bandwidth (the scenario's sweep bandwidths,
else ``network.bandwidth_mbps``), then strategy x scheduler x repetition as in the
twin; the scenario's faults and bandwidth schedule play during every job, from its
start until its summary comes (not while its processes are stopped), and the links
are restored after it.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from itertools import groupby
from operator import attrgetter
from pathlib import Path

from edgetwin.configuration import CrowdRun, crowd_runs, in_turn, run_label
from edgetwin.crowd_fleet import PhoneClass, PhoneSetup, resolve_classes
from edgetwin.emu.child_env import package_env
from edgetwin.emu.crowd_jobs import (
    CrowdJobs,
    check_crowd_jobs,
    crowd_phones,
)
from edgetwin.emu.crowdio.launcher import WORKER, Processes, WorkerSpec
from edgetwin.emu.crowdio.records import Event, PipelineSummary
from edgetwin.emu.memory_check import interpreter
from edgetwin.emu.mininet.checks import LinkCheck, measure_links
from edgetwin.emu.mininet.faults import (
    Action,
    FaultClock,
    FaultRecord,
    timeline,
    unplayed_warnings,
)
from edgetwin.emu.mininet.net import NETWORK_UP, START_UP, EmuNetwork, emulated_network
from edgetwin.emu.mininet.topology import (
    MAX_HOSTS,
    EmuTopology,
    HostLimits,
    build_topology,
    link_state_command,
)
from edgetwin.emulator_spec import JOB_TIMEOUT_S, MIN_HOST_CPU_CORES, EmulatorSpec
from edgetwin.errors import InputError
from edgetwin.links import worst_error_pct
from edgetwin.number_text import exact_text, figure_text
from edgetwin.progress import Step, Steps, naming, no_progress
from edgetwin.results import ResultRow
from edgetwin.run_folders import EMU, run_folder
from edgetwin.scenario import Scenario


@dataclass(frozen=True)
class CrowdEmuRun:
    """Rows in run order, the link checks, what the faults did, every job's summary, the
    faults and schedule steps the jobs ended before, and the hosts' congestion control."""

    rows: list[ResultRow]
    links: list[LinkCheck]
    faults: list[FaultRecord]
    summaries: list[PipelineSummary]
    warnings: list[str] = field(default_factory=list)
    congestion_control: str = ""  # what the hosts' TCP connections used, read in them


FOREMAN_HOST = 0


def crowd_topology(phones: int) -> EmuTopology:
    """The foreman's host (0) and one host per phone; the foreman's is the server, whose
    link is not shaped: the phones' links are the bottlenecks the scenario describes."""
    return build_topology(phones + 1, server=FOREMAN_HOST)


@dataclass(frozen=True)
class HostPlacement:
    """The foreman on host 0, worker i on host i + 1 of an emulated network."""

    net: EmuNetwork

    @property
    def foreman_address(self) -> str:
        return self.net.topology.hosts[FOREMAN_HOST].ip

    @property
    def store_over_network(self) -> bool:
        """Phones share no disk with the foreman: payloads too large to send inline cross
        their links to and from the store the foreman serves (the hosts share this
        machine's file system, which would let them skip the shaped links)."""
        return True

    def spawn(
        self, host: int, argv: list[str], env: dict[str, str], log: Path
    ) -> subprocess.Popen[bytes]:
        return self.net.popen(host, argv, log, {**env, **package_env()})


def check_crowd_emulatable(scenario: Scenario, scenario_path: Path | None) -> None:
    """``InputError`` naming the field if the emulator cannot run this crowd scenario."""
    crowd = scenario.crowd
    assert crowd is not None
    check_crowd_jobs(scenario, scenario_path)
    classes = resolve_classes(crowd, scenario_path)
    _check_phone_hosts(classes, scenario.emulator, scenario_path)
    hosts = len(crowd_phones(scenario, scenario_path)) + 1
    if hosts > MAX_HOSTS:
        problem = (
            f"{hosts - 1} phones; the emulator's subnet holds {MAX_HOSTS - 1} phones besides "
            "the foreman's host"
        )
        field = "crowd.fleet_size" if crowd.fleet_size is not None else "crowd.fleet"
        raise InputError(scenario_path, field, problem)
    for i, fault in enumerate(scenario.emulator.faults):
        if fault.host >= hosts:
            problem = f"no host {fault.host}: 0 is the foreman's, 1 to {hosts - 1} the phones'"
            raise InputError(scenario_path, f"emulator.faults.{i}.host", problem)


def _check_phone_hosts(
    classes: Sequence[PhoneClass], emulator: EmulatorSpec, scenario_path: Path | None
) -> None:
    """Each class's host gets at least MIN_HOST_CPU_CORES (its session budget is above 0:
    ``resolve_classes``)."""
    fastest = max(c.profile.cpu_gflops for c in classes)
    for phone_class in classes:
        cores = _phone_cores(emulator, phone_class, fastest)
        if emulator.cpu_limits and cores < MIN_HOST_CPU_CORES:
            problem = (
                f"class {phone_class.spec.name} would get {figure_text(cores)} cores (at least"
            )
            problem += f" {exact_text(MIN_HOST_CPU_CORES)}: a CFS quota cannot be smaller)"
            raise InputError(scenario_path, "emulator.cpu_cores_fastest", problem)


def _phone_cores(emulator: EmulatorSpec, phone_class: PhoneClass, fastest_gflops: float) -> float:
    """The cores a phone's host gets: ``cpu_cores_fastest`` x its GFLOPS / the fastest's."""
    return emulator.cpu_cores_fastest * phone_class.profile.cpu_gflops / fastest_gflops


def phone_limits(
    phones: Sequence[PhoneSetup], emulator: EmulatorSpec, cores: int, worker_mb: float
) -> list[HostLimits]:
    """Host limits, host 0 (the foreman) unlimited: phone i's host gets ``cpu_cores_fastest``
    x its ``cpu_gflops`` / the fastest phone's, as a fraction of ``cores``, and as memory
    its session budget (RAM less what Android keeps) plus ``worker_mb``, what its worker
    process holds before any session: its sessions get the whole budget, as on a twin
    phone and as the worker's free RAM says (``Worker.free_ram_mb``)."""
    fastest = max(phone.phone_class.profile.cpu_gflops for phone in phones)
    limits = [HostLimits()]
    for phone in phones:
        profile = phone.phone_class.profile
        share = _phone_cores(emulator, phone.phone_class, fastest) / cores
        budget_mb = profile.session_budget_mb(phone.phone_class.spec.ram_mb)
        limits.append(
            HostLimits(
                cpu_fraction=min(share, 1.0) if emulator.cpu_limits else None,
                memory_mb=budget_mb + worker_mb if emulator.memory_limits else None,
            )
        )
    return limits


def run_crowd_emu(
    scenario: Scenario,
    scenario_path: Path | None = None,
    on_progress: Step | None = None,
    *,
    steps: Steps = no_progress,
    link_check_s: int | None = None,
    timeout_s: float = JOB_TIMEOUT_S,
) -> CrowdEmuRun:
    """Every bandwidth x run of a crowd scenario in the emulator; always torn down.

    ``on_progress`` is told each run as it ends (its ``run_label`` if it takes one);
    ``steps`` shows the start-up's progress (``START_UP``: the worker's interpreter
    measured, the stages exported, the network up) and the link checks'.
    ``link_check_s`` (None: the scenario's ``emulator.link_check_s``) 0 skips the iperf3
    link checks."""
    if link_check_s is None:
        link_check_s = scenario.emulator.link_check_s
    phones = crowd_phones(scenario, scenario_path)
    runs = crowd_runs(scenario)
    topology = crowd_topology(len(phones))
    result = CrowdEmuRun([], [], [], [])
    played: dict[CrowdRun, PipelineSummary] = {}  # by run, in the order they played
    rows: dict[CrowdRun, ResultRow] = {}
    advance = naming(on_progress)
    # the scratch folder: the stages' export, the jobs' folders and caches
    with run_folder(EMU, "crowd") as scratch, ExitStack() as network:
        with steps(START_UP, 3) as started:
            worker_mb = interpreter(WORKER).bytes_for(1) / 2**20  # before any session
            limits = phone_limits(phones, scenario.emulator, os.cpu_count() or 1, worker_mb)
            started("worker interpreter measured")
            # exported, and checked to fit a phone class, before the network starts
            prepared = CrowdJobs.prepare(scenario, scenario_path, Path(scratch))
            started("stages exported to ONNX")
            first_mbps = runs[0].bandwidth_mbps
            net = network.enter_context(
                emulated_network(topology, scenario.network, first_mbps, limits)
            )
            started(NETWORK_UP)
        jobs = _JobRunner(net, prepared, timeout_s)
        for bandwidth_mbps, runs_at_bandwidth in groupby(
            in_turn(runs), attrgetter("bandwidth_mbps")
        ):
            net.set_bandwidth(bandwidth_mbps)
            checks = []
            if link_check_s > 0:
                phone_hosts = range(1, len(phones) + 1)
                checks = measure_links(net, bandwidth_mbps, phone_hosts, link_check_s, steps)
                result.links.extend(checks)
            link_error = worst_error_pct(c.error_pct for c in checks)
            for run in runs_at_bandwidth:
                summary, records = jobs.run(run)
                played[run] = summary
                result.faults.extend(records)
                row = prepared.row(run, summary, "emu")
                rows[run] = replace(row, link_error_pct=link_error)
                advance(run_label(run))
    result.summaries.extend(played[run] for run in runs)
    # a failed job (no summary's times a step could change) is none of the jobs counted
    ran = [jobs.missed[run] for run in runs if rows[run].ok]
    result.warnings.extend(unplayed_warnings(ran, "job"))
    result.rows.extend(rows[run] for run in runs)
    return replace(result, congestion_control=net.congestion_control)


class _JobRunner:
    """Runs one job on the network with the scenario's faults and schedule playing."""

    def __init__(self, net: EmuNetwork, jobs: CrowdJobs, timeout_s: float) -> None:
        self._net = net
        self.jobs = jobs
        self._placement = HostPlacement(net)
        scenario = jobs.scenario
        self._actions = timeline(net.topology, scenario.network, scenario.emulator.faults)
        self._timeout_s = timeout_s
        self.missed: dict[CrowdRun, list[Action]] = {}  # by job: faults and steps it ended before

    def run(self, run: CrowdRun) -> tuple[PipelineSummary, list[FaultRecord]]:
        clocks: list[FaultClock] = []
        cut_off: dict[str, tuple[int, str]] = {}  # worker -> (the host whose link, how)
        cutting = threading.Lock()  # the clock applies faults on other hosts at once
        workers = self.jobs.workers

        def watch(processes: Processes) -> Callable[[Event], None]:
            def apply(action: Action) -> None:
                self._net.run_all(action.commands)
                if action.host is not None:
                    with cutting:
                        _track_cut_off(action, workers, processes, cut_off)

            clock = FaultClock(run_label(run), self._actions, apply)
            clocks.append(clock)
            clock.apply_rates_at_start()  # before the job: its first blobs cross at that rate

            def on_event(_event: Event) -> None:
                if not clock.started:  # the job's first event: it has started
                    clock.start()

            return on_event

        def ended() -> None:  # the summary came: what plays after it is not in the job
            for clock in clocks:
                clock.stop()

        try:
            summary = self.jobs.run(
                run,
                self._placement,
                self._timeout_s,
                watch=watch if self._actions else None,
                unreachable=lambda: _unreachable(cut_off, cutting),
                ended=ended,
            )
        finally:
            records = clocks[0].stop() if clocks else []
            self.missed[run] = clocks[0].unplayed() if clocks else []
            if records:
                self._restore(run.bandwidth_mbps)
        return summary, [
            replace(r, effect=r.effect or _effect(r, summary, workers)) for r in records
        ]

    def _restore(self, bandwidth_mbps: float) -> None:
        """Every link up and at ``bandwidth_mbps`` again."""
        for rank in range(len(self._net.topology.hosts)):
            self._net.run(link_state_command(self._net.topology, rank, up=True))
        self._net.set_bandwidth(bandwidth_mbps)


def _unreachable(cut_off: dict[str, tuple[int, str]], cutting: threading.Lock) -> dict[str, str]:
    """The workers cut off from the foreman now, and how."""
    with cutting:
        return {name: how for name, (_, how) in cut_off.items()}


def _track_cut_off(
    action: Action,
    workers: Sequence[WorkerSpec],
    processes: Processes,
    cut_off: dict[str, tuple[int, str]],
) -> None:
    """Kill the worker of a ``kill_worker``; note the workers a link down for good cuts
    off from the foreman (all of them for the foreman's own link, host 0), and forget
    them when that link is up again (a shorter fault on the same host may end after)."""
    host = action.host
    assert host is not None
    if action.kind == "kill_worker":
        processes[workers[host - 1].name].kill()
    elif action.kind == "link_up":
        for name in [name for name, (down, _) in cut_off.items() if down == host]:
            del cut_off[name]
    elif action.for_good and host == 0:
        for worker in workers:
            how = f"{worker.name} is cut off from the foreman, whose link is down for good"
            cut_off[worker.name] = (0, how)
    elif action.for_good:
        name = workers[host - 1].name
        cut_off[name] = (host, f"{name}'s link is down for good")


def _effect(record: FaultRecord, summary: PipelineSummary, workers: Sequence[WorkerSpec]) -> str:
    """What the foreman's records show of a fault: for a phone's, the tasks its worker
    lost (re-dispatched), not the job's, which other faults may have cost too."""
    if record.kind == "bandwidth":
        return f"links at {record.detail}"
    if record.host is None or record.kind == "link_up":
        return ""
    if record.host == 0:
        return f"foreman's link; job done in {summary.pipeline_latency_ms:.0f} ms"
    worker = workers[record.host - 1].name
    requeued = sum(1 for e in summary.events if e.kind == "requeue" and e.worker == worker)
    lost = [e for e in summary.events if e.kind == "disconnect" and e.worker == worker]
    if lost:
        why = f" ({lost[0].detail}: declared lost)" if lost[0].detail else ""
        seen = f"{worker} disconnected at {lost[0].t_ms / 1e3:.2f} s{why}"
        return f"{seen}; tasks re-dispatched: {requeued}"
    if record.kind == "kill_worker":
        return f"{worker} not seen to leave; tasks re-dispatched: {requeued}"
    spans = [t.done_ms - t.dispatch_ms for t in summary.tasks if t.worker == worker]
    others = [t.done_ms - t.dispatch_ms for t in summary.tasks if t.worker != worker]
    slowest = f"slowest task on {worker} {max(spans):.0f} ms" if spans else f"no task on {worker}"
    typical = f", median elsewhere {statistics.median(others):.0f} ms" if others else ""
    return f"{slowest}{typical}; tasks re-dispatched: {requeued}"
