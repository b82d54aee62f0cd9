"""Run a scenario in the emulator (mode ``emu``): the real ViT or decoder ranks on Mininet
hosts, or a crowd scenario's CROWDio foreman and workers (``crowd.run_crowd_emu``).

One network for the whole scenario, with as many hosts as the largest configuration
has devices. Configurations run bandwidth by bandwidth: the links are set to the
rate, iperf3 checks what they carry, then the configurations at that rate run as in
local mode (``emu.local``), rank r on host r, GLOO bound to the host's shaped
interface, rank 0's address as the master. Single runs on host 0 alone. Rows are
local mode's with ``mode`` = ``emu``; ``bandwidth_mbps`` is the links' set rate.
A ``network.schedule`` plays in every timed run of a launch (a timed forward or generation:
a configuration's repetition), counted from its start (``emu.timed_start``: rank 0 says
when, its warm-ups done; a step at 0 ms is set before the ranks start and again before
each run after the first, the links back at the configuration's rate first), and is
recorded in ``EmuRun.faults``.
``emulator.host_cpu_cores`` gives host r a CFS quota of that many cores (heterogeneous
devices); without it no ViT host is limited.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TypeVar

from edgetwin.configuration import crowd_runs
from edgetwin.emu import timed_start
from edgetwin.emu.child_env import package_env
from edgetwin.emu.crowd_jobs import check_phones_fit, crowd_phones
from edgetwin.emu.llm import records as llm_records
from edgetwin.emu.llm.launcher import group_args, rank_command
from edgetwin.emu.llm.local_rows import decoder_model, decoder_rows
from edgetwin.emu.llm.runs import DecoderRun
from edgetwin.emu.local import (
    check_runnable,
    device_threads,
    measure_local,
    result_rows,
    told_repetitions,
)
from edgetwin.emu.mininet import congestion
from edgetwin.emu.mininet.checks import LinkCheck, measure_links
from edgetwin.emu.mininet.crowd import check_crowd_emulatable, phone_limits, run_crowd_emu
from edgetwin.emu.mininet.faults import Action, FaultRecord, timeline, unplayed_warnings
from edgetwin.emu.mininet.mn import missing_requirements
from edgetwin.emu.mininet.net import NETWORK_UP, START_UP, EmuNetwork, emulated_network
from edgetwin.emu.mininet.run_clocks import RunClocks
from edgetwin.emu.mininet.topology import (
    MAX_HOSTS,
    TC_RATE_RANGE_MBPS,
    HostLimits,
    build_topology,
    burst_problem,
    cpu_quota_warning,
)
from edgetwin.emu.vit import records as vit_records
from edgetwin.emu.vit.launcher import OnRep, RepReports, stop_ranks, wait_ranks
from edgetwin.emulator_spec import JOB_TIMEOUT_S
from edgetwin.errors import InputError
from edgetwin.links import worst_error_pct
from edgetwin.models.strategy import VIT_WORKER
from edgetwin.number_text import exact_text, figure_text
from edgetwin.progress import Step, Steps, no_progress
from edgetwin.results import ResultRow
from edgetwin.run_folders import EMU, run_folder
from edgetwin.scenario import Scenario
from edgetwin.sweep_points import Configuration, configurations, swept_keys

MASTER_PORT = 29500


@dataclass(frozen=True)
class EmuRun:
    """Rows in configuration order, the link checks (per bandwidth, per direction), the
    faults and bandwidth changes applied during the runs (and those the runs ended before,
    said in ``warnings``), and the hosts' congestion control."""

    rows: list[ResultRow]
    links: list[LinkCheck]
    faults: list[FaultRecord] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # faults and steps that never played
    congestion_control: str = ""  # what the hosts' TCP connections used, read in them

    def played(self, scenario: Scenario) -> Scenario:
        """``scenario`` as this run played it: with the congestion control its hosts used
        (the machine's where the scenario left it null), for its resolved scenario."""
        network = scenario.network.model_copy(
            update={"congestion_control": self.congestion_control}
        )
        return scenario.model_copy(update={"network": network})


def check_emulatable(scenario: Scenario, path: Path | None = None, *, machine: bool = True) -> None:
    """``InputError`` naming the field if the emulator cannot run ``scenario`` here;
    ``machine`` False checks the scenario only (not root, Mininet, free memory or the
    kernel's congestion controls)."""
    _check_link_rates(scenario, path)
    if scenario.crowd is not None:
        check_crowd_emulatable(scenario, path)
    else:
        check_runnable(scenario, path, machine=machine)
        _check_host_count(scenario, path)
        _check_host_cores(scenario, path, machine)
    if machine and scenario.crowd is not None:
        check_phones_fit(scenario, path)
    missing = missing_requirements() if machine else []
    if missing:
        raise InputError(path, "mode", "mode 'emu' needs " + "; ".join(missing))
    if machine:
        _check_congestion_control(scenario, path)


def _check_congestion_control(scenario: Scenario, path: Path | None) -> None:
    """``network.congestion_control`` is one this kernel has (its module loaded where it
    was not): a route set to another is refused mid-start."""
    name = scenario.network.congestion_control
    if name is not None and not congestion.load(name):
        have = " ".join(congestion.available())
        problem = (
            f"{name}: this kernel has {have} ({congestion.AVAILABLE}), and modprobe "
            f"tcp_{name} loaded no other"
        )
        raise InputError(path, "network.congestion_control", problem)


def _check_link_rates(scenario: Scenario, path: Path | None) -> None:
    """Every rate a link or, on the shared medium, a station's share is set to lies in
    ``TC_RATE_RANGE_MBPS``, and ``network.burst_kb`` fits tc's burst at each of them: tc
    refused either mid-run (exit 1, its own words), or wrapped a long burst around."""
    low_mbps, high_mbps = TC_RATE_RANGE_MBPS
    stations = _emulated_hosts(scenario) + 1 if scenario.network.medium == "shared" else 1
    burst_kb = scenario.network.burst_kb
    burst = None if burst_kb is None else burst_problem(burst_kb)
    if burst is not None:
        raise InputError(path, "network.burst_kb", burst)
    for name, mbps in _link_rates(scenario):
        each = f": {figure_text(mbps / stations)} Mbps each" if stations > 1 else ""
        share = f" ({stations} stations share it{each})" if stations > 1 else ""
        if not low_mbps * stations <= mbps <= high_mbps:
            problem = (
                f"{exact_text(mbps)} Mbps{share}: tc sets a link's rate from "
                f"{exact_text(low_mbps)} Mbps (8 bit/s) "
                f"to {exact_text(high_mbps)} Mbps"
            )
            raise InputError(path, name, problem)
        burst = None if burst_kb is None else burst_problem(burst_kb, mbps / stations)
        if burst is not None:
            shared = (
                f": {exact_text(mbps)} Mbps shared by {stations} stations" if stations > 1 else ""
            )
            raise InputError(path, "network.burst_kb", f"{burst} ({name}{shared})")


def _link_rates(scenario: Scenario) -> Iterator[tuple[str, float]]:
    """(field, rate) of every rate the emulator sets: the bandwidths run, schedule steps."""
    for i, sweep in enumerate(scenario.sweeps):
        for j, mbps in enumerate(sweep.bandwidth_mbps):
            yield f"sweeps.{i}.bandwidth_mbps.{j}", mbps
    if "network.bandwidth_mbps" not in swept_keys(scenario):
        yield "network.bandwidth_mbps", scenario.network.bandwidth_mbps
    for k, step in enumerate(scenario.network.schedule):
        yield f"network.schedule.{k}.bandwidth_mbps", step.bandwidth_mbps


def _emulated_hosts(scenario: Scenario) -> int:
    """Hosts the emulator builds: the foreman and one per phone, or one per device of the
    largest configuration."""
    if scenario.crowd is not None:
        return sum(scenario.crowd.class_counts()) + 1
    return max(config.devices for config in configurations(scenario))


def _check_host_count(scenario: Scenario, path: Path | None) -> None:
    """A host per device of the largest configuration: at most ``MAX_HOSTS``."""
    hosts = max(config.devices for config in configurations(scenario))
    if hosts > MAX_HOSTS:
        index = next(j for j, sweep in enumerate(scenario.sweeps) if hosts in sweep.devices)
        problem = f"{hosts} devices; the emulator builds at most {MAX_HOSTS} hosts"
        raise InputError(path, f"sweeps.{index}.devices", problem)


def _check_host_cores(scenario: Scenario, path: Path | None, machine: bool) -> None:
    """One value per host, each (``machine``) at most this machine's cores."""
    cores = scenario.emulator.host_cpu_cores
    if not cores:
        return
    hosts = max(config.devices for config in configurations(scenario))
    if len(cores) != hosts:
        problem = f"{len(cores)} values for {hosts} hosts (one per host, rank order)"
        raise InputError(path, "emulator.host_cpu_cores", problem)
    machine_cores = os.cpu_count() or 1
    for index, host_cores in enumerate(cores if machine else ()):
        if host_cores > machine_cores:
            problem = f"{exact_text(host_cores)} cores on a machine with {machine_cores}"
            raise InputError(path, f"emulator.host_cpu_cores.{index}", problem)


def vit_host_limits(scenario: Scenario, machine_cores: int) -> list[HostLimits]:
    """Host r's CPU quota as a fraction of the machine: ``host_cpu_cores[r]`` / its cores."""
    return [HostLimits(cpu_fraction=c / machine_cores) for c in scenario.emulator.host_cpu_cores]


def host_cpu_warning(
    scenario: Scenario, scenario_path: Path | None, machine_cores: int
) -> str | None:
    """``cpu_quota_warning`` for the hosts ``run_emu`` limits on a machine with
    ``machine_cores``: a crowd's phones (``phone_limits``), else the ViT hosts."""
    if scenario.crowd is not None:
        phones = crowd_phones(scenario, scenario_path)
        limits = phone_limits(phones, scenario.emulator, machine_cores, worker_mb=0.0)  # CPU only
        return cpu_quota_warning(limits, machine_cores, "emulator.cpu_cores_fastest")
    limits = vit_host_limits(scenario, machine_cores)
    return cpu_quota_warning(limits, machine_cores, "emulator.host_cpu_cores")


def emu_runs(scenario: Scenario) -> int:
    """How many rows ``run_emu`` makes (for progress)."""
    if scenario.crowd is not None:
        return len(crowd_runs(scenario))
    return len(configurations(scenario)) * scenario.repetitions


def run_emu(
    scenario: Scenario,
    scenario_path: Path | None = None,
    on_progress: Step | None = None,
    *,
    steps: Steps = no_progress,
    link_check_s: int | None = None,
    timeout_s: float | None = None,
) -> EmuRun:
    """Every configuration x repetition in the emulator; the network is always torn down.

    ``on_progress`` is told each row as it ends (its configuration's and repetition's
    label if it takes one: ``edgetwin.progress``); ``steps`` shows the start-up's progress
    (``START_UP``: the network up; a crowd's also its worker and stages) and the link
    checks' (seconds a direction) in between. ``link_check_s`` (None: the scenario's
    ``emulator.link_check_s``) 0 skips the iperf3 link checks.
    Raises ``InputError`` for what the emulator cannot run, ``LaunchError`` if a rank
    fails and ``EmuError`` if the network cannot be built.
    """
    check_emulatable(scenario, scenario_path)
    if link_check_s is None:
        link_check_s = scenario.emulator.link_check_s
    if scenario.crowd is not None:
        timeout_s = timeout_s or JOB_TIMEOUT_S
        crowd = run_crowd_emu(scenario, scenario_path, on_progress, steps=steps,
                              link_check_s=link_check_s, timeout_s=timeout_s)  # fmt: skip
        return EmuRun(
            crowd.rows, crowd.links, crowd.faults, crowd.warnings, crowd.congestion_control
        )
    by_bandwidth: dict[float, list[Configuration]] = {}
    for config in configurations(scenario):
        by_bandwidth.setdefault(config.bandwidth_mbps, []).append(config)
    most = max(config.devices for config in configurations(scenario))
    rows: dict[Configuration, list[ResultRow]] = {}
    links: list[LinkCheck] = []
    first = next(iter(by_bandwidth))
    limits = vit_host_limits(scenario, os.cpu_count() or 1)
    with ExitStack() as network:
        with steps(START_UP, 1) as started:
            topology = build_topology(most)
            net = network.enter_context(emulated_network(topology, scenario.network, first, limits))
            started(NETWORK_UP)
        launch = _HostLauncher(net)
        for bandwidth_mbps, group in by_bandwidth.items():
            net.set_bandwidth(bandwidth_mbps)
            launch.bandwidth_mbps = bandwidth_mbps
            hosts = max(config.devices for config in group)
            checks = []
            if link_check_s > 0:
                checks = measure_links(net, bandwidth_mbps, range(1, hosts), link_check_s, steps)
                links += checks
            link_error = worst_error_pct(c.error_pct for c in checks)
            measured = _measured(scenario, group, launch, timeout_s, on_progress)
            for config, config_rows in measured:
                rows[config] = [
                    replace(r, mode="emu", link_error_pct=link_error) for r in config_rows
                ]
    ordered = [row for config in configurations(scenario) for row in rows[config]]
    warnings = unplayed_warnings(launch.missed, "run")
    return EmuRun(ordered, links, launch.faults, warnings, net.congestion_control)


def _measured(
    scenario: Scenario,
    configs: Sequence[Configuration],
    launch: _HostLauncher,
    timeout_s: float | None,
    on_progress: Step | None,
) -> Iterator[tuple[Configuration, list[ResultRow]]]:
    """Local mode's rows of ``configs``, the ranks started on the hosts: the real decoder
    for a decoder scenario (``on_progress`` told each row as its launch ends), else the ViT
    (told each repetition as rank 0 ends it)."""
    tell = told_repetitions(on_progress)
    if decoder_model(scenario) is not None:
        threads = device_threads(scenario)
        decoded = decoder_rows(scenario, threads, timeout_s=timeout_s,
                               configs=configs, launch=launch.decoder, shaped=True)  # fmt: skip
        for config, rows in decoded:
            for row in rows:
                if tell is not None:
                    tell(config, row.rep)
            yield config, rows
        return
    runs = measure_local(scenario, timeout_s=timeout_s, configs=configs,
                         launch=launch, on_rep=tell, shaped=True)  # fmt: skip
    for run in runs:
        yield run.config, result_rows(scenario, run)


Record = TypeVar("Record")


class _HostLauncher:
    """Starts the ranks of one launch on the hosts (rank r on host r), the bandwidth
    schedule playing in each of their timed runs; a ``Launcher`` (ViT) and, by ``decoder``, a
    ``DecoderLauncher``."""

    def __init__(self, net: EmuNetwork) -> None:
        self._net = net
        self._launches = 0
        self._schedule = timeline(net.topology, net.network)
        self.bandwidth_mbps = 0.0  # the rate of the configurations launched now
        self.faults: list[FaultRecord] = []
        self.missed: list[list[Action]] = []  # each timed run's schedule steps it ended before

    def __call__(
        self,
        worker_args: Sequence[str],
        world: int,
        timeout_s: float,
        threads: int | None = None,
        echo_rank0: bool = False,
        on_rep: OnRep | None = None,
    ) -> list[vit_records.RankRecord]:
        hosts = self._net.topology.hosts
        port = self._next_port()
        common = [
            *worker_args,
            *("--world", str(world), "--master-addr", hosts[0].ip),
            *("--master-port", str(port), "--timeout-s", str(timeout_s)),
            *(() if threads is None else ("--threads", str(threads))),
            *("--parent-pid", str(os.getpid())),  # a rank outlives no killed run
        ]

        def command(rank: int, result: Path) -> list[str]:
            return [
                *(sys.executable, "-m", VIT_WORKER, "--rank", str(rank)),
                *("--iface", hosts[rank].iface, "--result", str(result), *common),
            ]

        return self._run(world, timeout_s, command, vit_records.read_record, on_rep)

    def decoder(
        self, run: DecoderRun, timeout_s: float, threads: int, extra_args: Sequence[str]
    ) -> list[llm_records.RankRecord]:
        """The real decoder's ranks: each host runs ``launcher.rank_command``."""
        hosts = self._net.topology.hosts
        port = self._next_port()

        def command(rank: int, result: Path) -> list[str]:
            common = [
                *run.worker_args(),
                *extra_args,
                *group_args(hosts[0].ip, port, hosts[rank].iface, timeout_s),
                *("--threads", str(threads), "--parent-pid", str(os.getpid())),
            ]
            return rank_command(rank, common, result)

        return self._run(run.world, timeout_s, command, llm_records.read_record)

    def _next_port(self) -> int:
        self._launches += 1  # a fresh port per launch: the last one's may be in TIME_WAIT
        return MASTER_PORT + self._launches

    def _run(
        self,
        world: int,
        timeout_s: float,
        command: Callable[[int, Path], list[str]],
        read: Callable[[Path], Record],
        on_rep: OnRep | None = None,
    ) -> list[Record]:
        """Rank r's ``command`` on host r, waited for with the deadline (with ``on_rep``, the
        ranks asked for their reports, told the forwards rank 0 reports meanwhile); their
        records. With a schedule, it plays in every timed run (``RunClocks``): its steps at
        0 ms set before the ranks start, the rest from the instant rank 0 announces the run
        (its clock looks for it every millisecond) to the instant it announces its end."""
        label = f"launch {self._launches} at {exact_text(self.bandwidth_mbps)} Mbps"
        restore = partial(self._net.set_bandwidth, self.bandwidth_mbps)
        with run_folder(EMU, "ranks") as tmp:
            folder = Path(tmp)
            reports = RepReports(folder, on_rep)
            announced = folder / timed_start.FILE
            clocks = RunClocks(label, announced, self._schedule, self._apply, restore)
            timed = ["--timed-start", str(announced)] if self._schedule else []

            def poll() -> None:
                reports.poll()
                clocks.look()

            ranks = []
            try:
                clocks.begin()
                for rank in range(world):
                    argv = [
                        *command(rank, folder / f"rank{rank}.json"),
                        *reports.worker_args(),
                        *timed,
                    ]
                    log = folder / f"rank{rank}.log"
                    ranks.append(self._net.popen(rank, argv, log, package_env()))
                wait_ranks(ranks, folder, timeout_s, poll)
            finally:
                stop_ranks(ranks)
                clocks.finish()
                self.faults += clocks.records
                self.missed += clocks.unplayed
            return [read(folder / f"rank{rank}.json") for rank in range(world)]

    def _apply(self, action: Action) -> None:
        self._net.run_all(action.commands)
