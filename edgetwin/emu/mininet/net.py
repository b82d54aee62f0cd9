"""Build the Mininet network of a topology and always tear it down; clean up after crashes.

``emulated_network`` removes leftovers of an earlier run, builds the hosts on a
Linux bridge (no controller), shapes every link, and on the way out (normal exit,
exception, Ctrl-C or SIGTERM) kills every process it started, stops Mininet and
removes whatever is left. ``cleanup_leftovers`` finds this package's leftovers by
name (``etw`` hosts, bridge and interfaces), by a marker in the environment of
the processes it starts in hosts, and by the pid and start time in the names of its
temporary folders (``run_folder``: ``edgetwin/run_folders.py``, kind ``emu``, left when a
run is SIGKILLed), which also name the folders a run makes elsewhere (``removed_if_killed``:
the staging folder beside ``--out``); it touches nothing else. A run's start says on stderr
what it removed.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgetwin import run_folders
from edgetwin.emu.child_env import package_env
from edgetwin.emu.mininet import congestion
from edgetwin.emu.mininet.cgroups import join, leftover_groups, limit_memory, remove_groups
from edgetwin.emu.mininet.delay import delay_line_argv, delay_rule_command
from edgetwin.emu.mininet.lock import emulator_lock
from edgetwin.emu.mininet.loss import loss_commands
from edgetwin.emu.mininet.medium import rate_commands_of, shaping_commands_of
from edgetwin.emu.mininet.mn import IP, mininet_module
from edgetwin.emu.mininet.topology import (
    PREFIX,
    PREFIX_LEN,
    EmuTopology,
    HostLimits,
    TcCommand,
    client_address_command,
    is_leftover_link,
    is_node_shell,
    netem_probe,
)
from edgetwin.errors import RunFailed, sigterm_interrupts
from edgetwin.network_spec import NetworkSpec
from edgetwin.number_text import exact_text
from edgetwin.run_folders import EMU

MARKER_ENV = "EDGETWIN_EMU"  # set to PREFIX on every process started in a host
START_UP = "emu start-up"  # the progress of what a run does before its first link check
NETWORK_UP = "network up"  # its last step: emulated_network has built and shaped the links
_EXIT_WAIT_S = 2.0
_DELAY_LINE_READY_S = 30.0  # a fresh interpreter on a busy machine
_LOG = logging.getLogger(__name__)  # notices: what a killed run left, the delay lines


class EmuError(RunFailed):
    """The emulated network could not be built or configured; it has been torn down."""


@dataclass
class EmuNetwork:
    """A running emulated network: run commands in nodes, start processes in hosts."""

    topology: EmuTopology
    network: NetworkSpec
    netem: bool
    _mininet: Any
    _memory_groups: dict[int, Path] = field(default_factory=dict)
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    delay_line: bool = False  # latency by the hosts' delay lines (no netem)
    congestion_control: str = ""  # what the hosts' TCP connections use, read in them

    @property
    def latency_emulated(self) -> bool:
        """Whether the links add the scenario's latency (netem, else the delay lines)."""
        return self.netem or self.delay_line

    def run(self, command: TcCommand) -> None:
        """Run ``command`` in its node's namespace; ``EmuError`` if it fails."""
        self.output(command)

    def output(self, command: TcCommand) -> str:
        """Run ``command`` in its node's namespace and return what it printed; ``EmuError``
        if it fails."""
        out, err, code = self._mininet.get(command.node).pexec(list(command.argv))
        if code != 0:
            raise EmuError(f"{command.line} on {command.node} failed: {err.strip()}")
        return str(out)

    def set_bandwidth(self, bandwidth_mbps: float) -> None:
        """Put every link (or the shared medium) at ``bandwidth_mbps`` (the scenario's burst
        kept), with ``run_tc``."""
        self.run_tc(rate_commands_of(self.topology, self.network, bandwidth_mbps))

    def run_all(self, commands: Sequence[TcCommand]) -> None:
        """Run an action's ``commands``: tc commands alone (a rate change) with ``run_tc``,
        anything else one after another."""
        if commands and all(command.argv[0] == "tc" for command in commands):
            self.run_tc(commands)
            return
        for command in commands:
            self.run(command)

    def run_tc(self, commands: Sequence[TcCommand]) -> None:
        """Run the tc ``commands``: those of one node as one ``tc -batch -`` fed their lines
        in order, every node's process started before any is waited for; ``EmuError``
        naming each node whose batch failed (docs/emulator.md: a step applied in half the
        time of one tc after another)."""
        batches: dict[str, list[str]] = {}
        for command in commands:
            if command.argv[0] != "tc":
                raise ValueError(f"not a tc command: {' '.join(command.argv)}")
            batches.setdefault(command.node, []).append(" ".join(command.argv[1:]))
        processes = {
            node: self._mininet.get(node).popen(
                ["tc", "-batch", "-"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for node in batches
        }
        for node, process in processes.items():
            assert process.stdin is not None
            process.stdin.write("".join(f"{line}\n" for line in batches[node]).encode())
            process.stdin.close()
        failed = []
        for node, process in processes.items():
            assert process.stderr is not None
            err = process.stderr.read().decode().strip()
            process.stderr.close()
            if process.wait() != 0:
                failed.append(f"tc -batch on {node} failed: {err}")
        if failed:
            raise EmuError("; ".join(failed))

    def popen(
        self, rank: int, argv: Sequence[str], log: Path | None, env: Mapping[str, str] = {}
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` in host ``rank`` (marked for cleanup, ``env`` added to ours, its
        ``TMPDIR`` this run's temporary folder unless ``env`` says); stdout and stderr to
        ``log``, else kept as pipes."""
        host = self._mininet.get(self.topology.hosts[rank].name)
        # TMPDIR: where this run's own temporary folders are (Python's choice: $TMPDIR, or
        # /tmp where that is missing; iperf3 failed there: "unable to create a new stream")
        temp = {"TMPDIR": tempfile.gettempdir()}
        env = {**os.environ, **temp, **env, "PYTHONUNBUFFERED": "1", MARKER_ENV: PREFIX}
        if log is None:
            process: subprocess.Popen[bytes] = host.popen(list(argv), env=env)
        else:
            with log.open("wb") as out:
                process = host.popen(
                    list(argv), stdout=out, stderr=out, stdin=subprocess.DEVNULL, env=env
                )
        self._processes.append(process)
        if rank in self._memory_groups:
            join(self._memory_groups[rank], process.pid)
        return process

    def stop_processes(self) -> None:
        """Kill every process started in a host that is still running, and reap it."""
        for process in self._processes:
            if process.poll() is None:
                process.kill()
        for process in self._processes:
            process.wait()
        self._processes.clear()


@contextmanager
def emulated_network(
    topology: EmuTopology,
    network: NetworkSpec,
    bandwidth_mbps: float,
    limits: Sequence[HostLimits] = (),
) -> Iterator[EmuNetwork]:
    """The network of ``topology``, every link at ``bandwidth_mbps``; torn down on exit.

    Host r gets ``limits[r]`` (CPU and memory) where given. This process reaches the
    hosts through the bridge. Holds the machine's emulator lock throughout: a second
    run waits for this one."""
    with emulator_lock(), sigterm_interrupts():
        yield from _network_of(topology, network, bandwidth_mbps, limits)


def _network_of(
    topology: EmuTopology,
    network: NetworkSpec,
    bandwidth_mbps: float,
    limits: Sequence[HostLimits],
) -> Iterator[EmuNetwork]:
    left = cleanup_leftovers()
    if left:
        _LOG.warning("removed what a killed emulator run left: %s", left)
    net = _mininet(topology, limits)
    emu: EmuNetwork | None = None
    try:
        net.build()
        net.start()
        emu = EmuNetwork(topology, network, _has_netem(net, topology, network), net)
        for rank, limit in enumerate(limits):
            if limit.memory_mb is not None:
                emu._memory_groups[rank] = limit_memory(topology.hosts[rank].name, limit.memory_mb)
        for command in shaping_commands_of(topology, network, bandwidth_mbps, emu.netem):
            emu.run(command)
        for command in loss_commands(topology, network.loss_pct):
            emu.run(command)
        if network.latency_ms > 0 and not emu.netem:
            _start_delay_lines(emu)
        emu.congestion_control = _congestion_control(emu)
        emu.run(client_address_command(topology))
        yield emu
    finally:
        try:
            if emu is not None:
                emu.stop_processes()
            net.stop()
        finally:
            cleanup_leftovers()


@dataclass(frozen=True)
class Leftovers:
    """What ``cleanup_leftovers`` removed."""

    processes: tuple[int, ...]
    links: tuple[str, ...]
    folders: tuple[Path, ...] = ()
    groups: tuple[Path, ...] = ()  # cgroups (a host's CPU group in each controller, memory)

    def __bool__(self) -> bool:
        return bool(self.processes or self.links or self.folders or self.groups)

    def __str__(self) -> str:
        processes, links, folders = len(self.processes), len(self.links), len(self.folders)
        groups = len(self.groups)
        return (
            f"{processes} process{'es' * (processes != 1)} killed, "
            f"{links} link{'s' * (links != 1)}, {groups} cgroup{'s' * (groups != 1)} and "
            f"{folders} folder{'s' * (folders != 1)} removed"
        )


def cleanup_leftovers() -> Leftovers:
    """Kill this package's processes (Mininet shells of ``etw`` nodes, processes started in
    hosts) and delete its interfaces and bridge; what a crashed run left behind."""
    pids = leftover_processes()
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + _EXIT_WAIT_S
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    links = leftover_links()
    for name in links:
        subprocess.run([IP, "link", "del", name], capture_output=True, check=False)
    groups = remove_groups(leftover_groups())
    folders = run_folders.remove_leftovers(EMU)
    return Leftovers(tuple(pids), tuple(links), tuple(folders), tuple(groups))


def leftover_processes() -> list[int]:
    """Pids of this package's processes, other than this one."""
    marker = f"{MARKER_ENV}={PREFIX}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        argv = cmdline.decode(errors="replace").split("\0")[:-1]
        if is_node_shell(argv) or marker in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def leftover_links() -> list[str]:
    """This package's interfaces and bridge in the root namespace."""
    listing = subprocess.run([IP, "-o", "link", "show"], capture_output=True, text=True)
    names = [line.split(":")[1].strip().split("@")[0] for line in listing.stdout.splitlines()]
    return [name for name in names if is_leftover_link(name)]


def _mininet(topology: EmuTopology, limits: Sequence[HostLimits]) -> Any:
    """An unbuilt Mininet network of ``topology``: hosts (CPU-limited where ``limits`` say),
    a Linux bridge, plain veth links."""
    mininet_net, nodelib, link, node = (
        mininet_module(n) for n in ("net", "nodelib", "link", "node")
    )
    mininet_module("log").setLogLevel("error")  # not its notes on bridge netfilter settings
    net = mininet_net.Mininet(
        topo=None, switch=nodelib.LinuxBridge, controller=None, link=link.Link, build=False
    )
    bridge = net.addSwitch(topology.bridge)
    for host in topology.hosts:
        fraction = limits[host.rank].cpu_fraction if host.rank < len(limits) else None
        cpu = {} if fraction is None else {"cls": node.CPULimitedHost, "cpu": fraction}
        added = net.addHost(host.name, ip=f"{host.ip}/{PREFIX_LEN}", **cpu)
        net.addLink(added, bridge, intfName1=host.iface, intfName2=host.bridge_port)
    return net


def _has_netem(net: Any, topology: EmuTopology, network: NetworkSpec) -> bool:
    """Probe for netem only when the scenario asks for latency."""
    if network.latency_ms <= 0:
        return False
    add, remove = netem_probe(topology.hosts[0].iface)
    _, _, code = net.get(add.node).pexec(list(add.argv))
    if code == 0:
        net.get(remove.node).pexec(list(remove.argv))
    return int(code) == 0


def _congestion_control(emu: EmuNetwork) -> str:
    """Set ``network.congestion_control`` on every host's route where given (``EmuError``
    if a route does not read it back), and return what the hosts' connections use: that,
    else the machine's, as each host has it."""
    wanted = emu.network.congestion_control
    used = set()
    for host in emu.topology.hosts:
        if wanted is None:
            used.add(emu.output(congestion.default_command(host)).strip())
            continue
        emu.run(congestion.route_command(host, wanted))
        route = emu.output(congestion.route_show_command(host))
        got = congestion.route_congctl(route)
        if got != wanted:
            problem = f"congestion control {got or 'none'}, not {wanted}: {route.strip()}"
            raise EmuError(f"the route of {host.name} has {problem}")
        used.add(got)
    if len(used) != 1:
        raise EmuError(f"the hosts' connections use {', '.join(sorted(used))}, not one")
    return used.pop()


def _start_delay_lines(emu: EmuNetwork) -> None:
    """A delay line in every host (``delay.py``), and the rule that feeds it once it is
    bound to its queue; ``EmuError`` if one does not come up."""
    for host in emu.topology.hosts:
        argv = delay_line_argv(emu.network.latency_ms, os.getpid())
        line = emu.popen(host.rank, argv, None, package_env())
        assert line.stdout is not None and line.stderr is not None
        ready, _, _ = select.select([line.stdout], [], [], _DELAY_LINE_READY_S)
        if not ready or line.stdout.readline().strip() != b"ready":
            line.kill()
            _, err = line.communicate()
            raise EmuError(f"the delay line on {host.name} did not start: {err.decode().strip()}")
        emu.run(delay_rule_command(host))
    emu.delay_line = True
    _LOG.warning(
        "no netem here: latency_ms %s is added by a userspace delay line in every host "
        "(docs/emulator.md)",
        exact_text(emu.network.latency_ms),
    )
