"""Topology and traffic-control commands from a scenario: pure data, testable without root.

One host per device (rank r on host r), all on one Linux bridge. Every device's link
is shaped in both directions by an htb class at the configuration's bandwidth: on
the host's interface (host -> bridge) and on the bridge's port (bridge -> host).
A topology may name a server (a crowd's foreman), a host that is no device: its link
is not shaped, so what it sends to several devices at once crosses each device's link
alone. A packet between two hosts crosses two queues, so each adds half the
scenario's one-way ``latency_ms`` (netem, only where the kernel has it; on the
server's queues without a shaper above it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from edgetwin.network_spec import NetworkSpec
from edgetwin.number_text import exact_text, figure_text

PREFIX = "etw"  # every host, bridge and interface name starts with it (cleanup finds them)
SUBNET = "10.77.0"  # hosts are SUBNET.1, SUBNET.2, ...
PREFIX_LEN = 24
MAX_HOSTS = 250  # SUBNET.1 to .250 (the client address is .254)
HTB_HANDLE = "5:"
HTB_CLASS = "5:1"
NETEM_HANDLE = "10:"
# tc sets an htb rate in whole bytes per second, so 8 bit/s at least; past 1e13 Mbit/s it
# sets another rate than asked (1e14 read back as 7.8e12) or refuses (1.5e14)
TC_RATE_RANGE_MBPS = (8e-6, 1e13)
# tc holds an htb burst in 32 bits: its bytes ("Illegal burst" from 4194304 kb), and its
# time at the class's rate in the kernel's 64 ns ticks (2**32 of them: 274.9 s); a burst
# that takes longer wraps, unsaid (1e6 kb at 1 Mbit/s read back as 6.1 MB)
TC_BURST_MAX_BYTES = 2**32 - 1
TC_BURST_MAX_S = 2**32 * 64e-9
TC_KB = 1024  # tc's kb, the unit the scenario's burst_kb is given to tc in
_LEFTOVER = re.compile(rf"^{PREFIX}([hs]\d+(-eth\d+)?|ifb\d+)$")
_NODE_SHELL = ("bash", "--norc", "--noediting", "-is")  # Mininet's Node.startShell, then
_NODE_SHELL_NAME = re.compile(rf"^mininet:{PREFIX}[hs]\d+$")  # the node: mininet:etwh0


@dataclass(frozen=True)
class EmuHost:
    """One device: its host, address and interface (``iface``), and the bridge port facing it."""

    rank: int
    name: str
    ip: str
    iface: str
    bridge_port: str


@dataclass(frozen=True)
class EmuTopology:
    """Hosts in rank order, all on ``bridge``; ``server``: the rank of the host that serves
    the others (a crowd's foreman), whose link is not shaped (None: every host is a device)."""

    bridge: str
    hosts: tuple[EmuHost, ...]
    server: int | None = None

    def shaped(self, rank: int) -> bool:
        """Whether host ``rank``'s link is shaped (on dedicated links): every device's, not
        the server's. The one place that says which links the shaping and every rate change
        act on."""
        return rank != self.server


@dataclass(frozen=True)
class TcCommand:
    """A command and the node whose network namespace runs it (a host, or the bridge's: root)."""

    node: str
    argv: tuple[str, ...]

    @property
    def line(self) -> str:
        """The command as a person reads it: its numbers without an exponent (``rate
        2000000mbit``; its argument, ``2e+06mbit``, is tc's to read), else its argv."""
        return " ".join(_EXPONENT_NUMBER.sub(_plain_number, arg) for arg in self.argv)


_EXPONENT_NUMBER = re.compile(r"^(-?[0-9.]+e[-+][0-9]+)([a-z]*)$")  # "2e+06mbit", "2.5e-05ms"


def _plain_number(match: re.Match[str]) -> str:
    return exact_text(float(match.group(1))).replace(",", "") + match.group(2)


def build_topology(devices: int, server: int | None = None) -> EmuTopology:
    """``devices`` hosts on one bridge; host r is ``etwh{r}`` at SUBNET.(r+1); host
    ``server``'s link is not shaped (``EmuTopology.server``)."""
    if not 1 <= devices <= MAX_HOSTS:
        raise ValueError(f"the emulator builds 1 to {MAX_HOSTS} hosts, not {devices}")
    if server is not None and not 0 <= server < devices:
        raise ValueError(f"no host {server} among {devices} to be the server")
    bridge = f"{PREFIX}s0"
    hosts = tuple(
        EmuHost(
            rank=rank,
            name=f"{PREFIX}h{rank}",
            ip=f"{SUBNET}.{rank + 1}",
            iface=f"{PREFIX}h{rank}-eth0",
            bridge_port=f"{bridge}-eth{rank + 1}",
        )
        for rank in range(devices)
    )
    return EmuTopology(bridge, hosts, server)


def is_leftover_link(name: str) -> bool:
    """Whether an interface name (``ip link``, without ``@peer``) is one this package makes."""
    return bool(_LEFTOVER.match(name))


def is_node_shell(argv: Sequence[str]) -> bool:
    """Whether a process's arguments are Mininet's shell of one of this package's nodes
    (``bash --norc --noediting -is mininet:etwh0``), not any command naming one (a
    ``pgrep -f mininet:etwh0``, a script given it as an argument)."""
    *shell, name = argv or [""]
    return tuple(shell) == _NODE_SHELL and bool(_NODE_SHELL_NAME.match(name))


def _link_queues(topology: EmuTopology, host: EmuHost) -> list[tuple[str, str]]:
    """(node, interface) of both egress queues of ``host``'s link: its interface, the
    bridge's port facing it."""
    return [(host.name, host.iface), (topology.bridge, host.bridge_port)]


def _queues(topology: EmuTopology, shaped: bool = True) -> list[tuple[str, str]]:
    """(node, interface) of the egress queues at both ends of every shaped link (or, with
    ``shaped`` False, of the server's link, which is not)."""
    return [
        queue
        for host in topology.hosts
        if topology.shaped(host.rank) == shaped
        for queue in _link_queues(topology, host)
    ]


def _rate(bandwidth_mbps: float, burst_kb: float | None) -> tuple[str, ...]:
    rate = ("rate", f"{bandwidth_mbps:g}mbit", "ceil", f"{bandwidth_mbps:g}mbit")
    if burst_kb is None:
        return rate
    return (*rate, "burst", f"{burst_kb:g}kb", "cburst", f"{burst_kb:g}kb")


def burst_problem(burst_kb: float, rate_mbps: float | None = None) -> str | None:
    """Why tc cannot set an htb burst of ``burst_kb`` (on a class at ``rate_mbps``; None:
    its bytes alone), else None."""
    burst_bytes = burst_kb * TC_KB
    if burst_bytes > TC_BURST_MAX_BYTES:
        most = TC_BURST_MAX_BYTES // TC_KB
        return f"{exact_text(burst_kb)} kb: tc sets a burst of at most {most:,} kb"
    if rate_mbps is None:
        return None
    burst_s = burst_bytes * 8 / (rate_mbps * 1e6)
    if burst_s > TC_BURST_MAX_S:
        return (
            f"{exact_text(burst_kb)} kb takes {figure_text(burst_s)} s at {figure_text(rate_mbps)}"
            f" Mbps: tc sets a burst of at most {figure_text(TC_BURST_MAX_S)} s of its class's"
            " rate (a longer one wraps around)"
        )
    return None


def shaping_commands(
    topology: EmuTopology, network: NetworkSpec, bandwidth_mbps: float, netem: bool
) -> list[TcCommand]:
    """Set up every shaped queue: an htb root with one class at ``bandwidth_mbps`` (and the
    scenario's ``burst_kb``), then half the latency on it if ``netem`` (the kernel has it);
    the server's queues get the half latency alone (a netem root), no shaper."""
    half_latency = ("netem", "delay", f"{network.latency_ms / 2:g}ms")
    commands = []
    if netem and network.latency_ms > 0:
        commands += [
            TcCommand(node, ("tc", "qdisc", "replace", "dev", iface, "root", *half_latency))
            for node, iface in _queues(topology, shaped=False)
        ]
    for node, iface in _queues(topology):
        dev = ("dev", iface)
        commands += [
            TcCommand(
                node,
                (
                    "tc",
                    "qdisc",
                    "replace",
                    *dev,
                    "root",
                    "handle",
                    HTB_HANDLE,
                    "htb",
                    "default",
                    "1",
                ),
            ),
            TcCommand(
                node,
                (
                    "tc",
                    "class",
                    "replace",
                    *dev,
                    "parent",
                    HTB_HANDLE,
                    "classid",
                    HTB_CLASS,
                    "htb",
                    *_rate(bandwidth_mbps, network.burst_kb),
                ),
            ),
        ]
        if netem and network.latency_ms > 0:
            commands.append(
                TcCommand(
                    node,
                    (
                        "tc",
                        "qdisc",
                        "replace",
                        *dev,
                        "parent",
                        HTB_CLASS,
                        "handle",
                        NETEM_HANDLE,
                        *half_latency,
                    ),
                )
            )
    return commands


def rate_commands(
    topology: EmuTopology, bandwidth_mbps: float, burst_kb: float | None = None
) -> list[TcCommand]:
    """Change every shaped queue's rate in place (the htb root stays; traffic is not
    interrupted)."""
    return [
        TcCommand(
            node,
            (
                "tc",
                "class",
                "change",
                "dev",
                iface,
                "parent",
                HTB_HANDLE,
                "classid",
                HTB_CLASS,
                "htb",
                *_rate(bandwidth_mbps, burst_kb),
            ),
        )
        for node, iface in _queues(topology)
    ]


_TC_RATE = re.compile(r"\brate (\d+(?:\.\d+)?)([KMGT]?)bit\b")
_TC_UNIT_MBPS = {"": 1e-6, "K": 1e-3, "M": 1.0, "G": 1e3, "T": 1e6}


def class_show_command(node: str, iface: str) -> TcCommand:
    """List the shaping class of ``iface`` (``tc class show``), to read its rate back."""
    return TcCommand(node, ("tc", "class", "show", "dev", iface, "classid", HTB_CLASS))


def parse_class_rate_mbps(listing: str) -> float:
    """The rate of a ``tc class show`` line (``... rate 200Mbit ceil ...``), in Mbps."""
    match = _TC_RATE.search(listing)
    if match is None:
        raise ValueError(f"no rate in tc's listing: {listing.strip()!r}")
    return float(match.group(1)) * _TC_UNIT_MBPS[match.group(2)]


def path_queues(topology: EmuTopology, sender: int, receiver: int) -> list[tuple[str, str]]:
    """(node, interface) of the shaped queues a packet from ``sender`` to ``receiver``
    crosses: the sender's interface, then the bridge's port facing the receiver (either
    left out where it is the server's: not shaped)."""
    outgoing = _link_queues(topology, topology.hosts[sender])[0]
    incoming = _link_queues(topology, topology.hosts[receiver])[1]
    return [
        queue for rank, queue in ((sender, outgoing), (receiver, incoming)) if topology.shaped(rank)
    ]


def netem_probe(iface: str) -> tuple[TcCommand, TcCommand]:
    """Add, then remove, a netem root on ``iface``: whether the add works says if the
    kernel has netem (``sch_netem``)."""
    node = iface.split("-")[0]
    return (
        TcCommand(node, ("tc", "qdisc", "add", "dev", iface, "root", "netem", "delay", "1ms")),
        TcCommand(node, ("tc", "qdisc", "del", "dev", iface, "root")),
    )


@dataclass(frozen=True)
class HostLimits:
    """A host's share of the machine: ``cpu_fraction`` of all cores (a CFS quota) and
    ``memory_mb`` (a memory cgroup); None: unlimited."""

    cpu_fraction: float | None = None
    memory_mb: float | None = None


def cpu_quota_warning(limits: Sequence[HostLimits], machine_cores: int, field: str) -> str | None:
    """A warning if the hosts' CPU quotas add up to more than ``machine_cores``, else None
    (also when no host has one: none given, or cpu limits off). ``field``: the scenario
    field that sets the quotas.

    No headroom is kept for what runs unlimited (a crowd's foreman on host 0, this
    process): its load is small next to the hosts' compute and not known beforehand, so
    quotas that fill the machine exactly pass."""
    quota_cores = machine_cores * math.fsum(limit.cpu_fraction or 0 for limit in limits)
    if quota_cores <= machine_cores + 1e-9:  # a fraction's rounding is not sharing
        return None
    return (
        f"{field} gives the hosts CPU quotas of {figure_text(quota_cores)} cores in all, more than "
        "this "
        f"machine's {machine_cores}: hosts busy at once share its cores, so compute and load "
        "times come out longer than on devices with a CPU each"
    )


def client_address_command(topology: EmuTopology) -> TcCommand:
    """Give the bridge an address (SUBNET.254) so this process reaches the hosts (the SDK)."""
    address = f"{SUBNET}.254/{PREFIX_LEN}"
    return TcCommand(topology.bridge, ("ip", "addr", "add", address, "dev", topology.bridge))


def link_state_command(topology: EmuTopology, rank: int, up: bool) -> TcCommand:
    """Take host ``rank``'s link down (or up) at the bridge's port: both directions stop,
    the host keeps its address, routes and queues."""
    port = topology.hosts[rank].bridge_port
    return TcCommand(topology.bridge, ("ip", "link", "set", "dev", port, "up" if up else "down"))
