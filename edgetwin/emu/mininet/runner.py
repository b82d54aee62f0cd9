"""Run a scenario in the emulator (mode ``emu``): the real ViT ranks on Mininet hosts.

One network for the whole scenario, with as many hosts as the largest configuration
has devices. Configurations run bandwidth by bandwidth: the links are set to the
rate, iperf3 checks what they carry, then the configurations at that rate run as in
local mode (``emu.local``), rank r on host r, GLOO bound to the host's shaped
interface, rank 0's address as the master. Single runs on host 0 alone. Rows are
local mode's with ``mode`` = ``emu``; ``bandwidth_mbps`` is the links' set rate.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import edgetwin
from edgetwin.emu.local import check_runnable, measure_local, result_rows
from edgetwin.emu.mininet.checks import LinkCheck, measure_links
from edgetwin.emu.mininet.mn import missing_requirements
from edgetwin.emu.mininet.net import EmuNetwork, emulated_network
from edgetwin.emu.mininet.topology import build_topology
from edgetwin.emu.vit.launcher import stop_ranks, wait_ranks
from edgetwin.emu.vit.records import RankRecord, read_record
from edgetwin.errors import InputError
from edgetwin.results import ResultRow
from edgetwin.scenario import Configuration, Scenario, configurations

MASTER_PORT = 29500
LINK_CHECK_S = 2.0  # iperf3 seconds per direction, after a one-second warm-up


@dataclass(frozen=True)
class EmuRun:
    """Rows in configuration order, and the link checks (per bandwidth, per direction)."""

    rows: list[ResultRow]
    links: list[LinkCheck]


def check_emulatable(scenario: Scenario, path: Path | None = None) -> None:
    """``InputError`` naming the field if the emulator cannot run ``scenario`` here."""
    if scenario.crowd is not None:
        raise InputError(path, "mode", "the CROWDio pipeline does not run in the emulator yet")
    check_runnable(scenario, path)
    if scenario.network.medium != "dedicated":
        raise InputError(path, "network.medium", "the emulator has dedicated links only")
    if scenario.network.schedule:
        problem = "bandwidth schedules are not applied during an emulator run yet"
        raise InputError(path, "network.schedule", problem)
    missing = missing_requirements()
    if missing:
        raise InputError(path, "mode", "mode 'emu' needs " + "; ".join(missing))


def run_emu(
    scenario: Scenario,
    scenario_path: Path | None = None,
    on_progress: Callable[[], None] | None = None,
    *,
    warmup: int = 2,
    link_check_s: float = LINK_CHECK_S,
    timeout_s: float | None = None,
) -> EmuRun:
    """Every configuration x repetition in the emulator; the network is always torn down.

    Raises ``InputError`` for what the emulator cannot run, ``LaunchError`` if a rank
    fails and ``EmuError`` if the network cannot be built.
    """
    check_emulatable(scenario, scenario_path)
    by_bandwidth: dict[float, list[Configuration]] = {}
    for config in configurations(scenario):
        by_bandwidth.setdefault(config.bandwidth_mbps, []).append(config)
    most = max(config.devices for config in configurations(scenario))
    rows: dict[Configuration, list[ResultRow]] = {}
    links: list[LinkCheck] = []
    first = next(iter(by_bandwidth))
    with emulated_network(build_topology(most), scenario.network, first) as net:
        launch = _HostLauncher(net)
        for bandwidth_mbps, group in by_bandwidth.items():
            net.set_bandwidth(bandwidth_mbps)
            hosts = max(config.devices for config in group)
            links += measure_links(net, bandwidth_mbps, range(1, hosts), link_check_s)
            runs = measure_local(scenario, warmup=warmup, timeout_s=timeout_s, configs=group,
                                 launch=launch)  # fmt: skip
            for run in runs:
                rows[run.config] = [replace(r, mode="emu") for r in result_rows(scenario, run)]
                for _ in rows[run.config]:
                    if on_progress is not None:
                        on_progress()
    return EmuRun([row for config in configurations(scenario) for row in rows[config]], links)


class _HostLauncher:
    """Starts the ranks of one launch on the hosts (rank r on host r); a ``Launcher``."""

    def __init__(self, net: EmuNetwork) -> None:
        self._net = net
        self._launches = 0

    def __call__(
        self,
        worker_args: Sequence[str],
        world: int,
        timeout_s: float,
        threads: int | None = None,
        echo_rank0: bool = False,
    ) -> list[RankRecord]:
        hosts = self._net.topology.hosts
        self._launches += 1  # a fresh port per launch: the last one's may be in TIME_WAIT
        common = [
            *worker_args,
            *("--world", str(world), "--master-addr", hosts[0].ip),
            *("--master-port", str(MASTER_PORT + self._launches), "--timeout-s", str(timeout_s)),
            *(() if threads is None else ("--threads", str(threads))),
        ]
        package_root = str(Path(edgetwin.__file__).resolve().parents[1])
        path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
        with tempfile.TemporaryDirectory(prefix="edgetwin-emu-") as tmp:
            folder = Path(tmp)
            ranks = []
            try:
                for rank in range(world):
                    result = str(folder / f"rank{rank}.json")
                    argv = [
                        *(sys.executable, "-m", "edgetwin.emu.vit.worker", "--rank", str(rank)),
                        *("--iface", hosts[rank].iface, "--result", result, *common),
                    ]
                    log = folder / f"rank{rank}.log"
                    ranks.append(self._net.popen(rank, argv, log, {"PYTHONPATH": path}))
                wait_ranks(ranks, folder, timeout_s)
            finally:
                stop_ranks(ranks)
            return [read_record(folder / f"rank{rank}.json") for rank in range(world)]
