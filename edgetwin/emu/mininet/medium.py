"""The shared medium (``network.medium: shared``): one shaper for every station's airtime.

On WiFi every station's transmissions, uplink and downlink, take turns on one channel.
The emulator sends every packet a host transmits, and every packet this process (the
access point's side: the CROWDio SDK) transmits to a host, through one IFB device in the
root namespace, ``etwifb0``: a ``clsact`` filter redirects it there from the bridge
port's ingress (what host r sent) or from the bridge's own egress (what this process
sent). A packet crosses one of those points once, whoever receives it, so it is shaped
once. On the IFB one htb class holds all of them at the medium's rate; under it one leaf
per station (host r by its source address; the access point's takes the rest: this
process's packets, ARP) is guaranteed an equal share and may borrow up to the whole
rate. A station alone gets the whole medium, n busy stations 1/n each: htb lends the
unused rate round robin, one frame per turn, as WiFi's DCF gives each station equal
turns. The hosts' own links are not shaped then. With netem, each leaf adds the whole
one-way ``latency_ms`` (one queue on the way).
"""

from __future__ import annotations

from edgetwin.emu.mininet.topology import (
    HTB_CLASS,
    HTB_HANDLE,
    PREFIX,
    EmuTopology,
    TcCommand,
    path_queues,
    rate_commands,
    shaping_commands,
)
from edgetwin.network_spec import NetworkSpec

MEDIUM_DEVICE = f"{PREFIX}ifb0"
QUEUE_PACKETS = 1000  # each leaf's FIFO: a veth's default txqueuelen, as on dedicated links
# one full Ethernet frame on the wire (header + 1500-byte IP packet): htb's round-robin
# quantum, one frame per turn
FRAME_BYTES = 1514
_ACCESS_POINT_MINOR = 2  # the leaf of everything not sent by a host


def station_classes(topology: EmuTopology) -> list[tuple[str, str | None]]:
    """(htb class id, source address) of every station's leaf: the access point's first
    (no address: the default class), then host r's."""
    classes: list[tuple[str, str | None]] = [(f"{HTB_HANDLE}{_ACCESS_POINT_MINOR:x}", None)]
    for host in topology.hosts:
        classes.append((f"{HTB_HANDLE}{host.rank + _ACCESS_POINT_MINOR + 1:x}", host.ip))
    return classes


def _rate(bandwidth_mbps: float, ceil_mbps: float, burst_kb: float | None) -> tuple[str, ...]:
    rate = ("rate", f"{bandwidth_mbps:g}mbit", "ceil", f"{ceil_mbps:g}mbit")
    burst = () if burst_kb is None else ("burst", f"{burst_kb:g}kb", "cburst", f"{burst_kb:g}kb")
    return (*rate, *burst, "quantum", str(FRAME_BYTES))


def _class_argv(
    verb: str, parent: str, classid: str, rate_mbps: float, ceil_mbps: float, burst_kb: float | None
) -> tuple[str, ...]:
    return (
        *("tc", "class", verb, "dev", MEDIUM_DEVICE, "parent", parent, "classid", classid),
        *("htb", *_rate(rate_mbps, ceil_mbps, burst_kb)),
    )


def _classes(
    topology: EmuTopology, verb: str, bandwidth_mbps: float, burst_kb: float | None
) -> list[TcCommand]:
    """The medium's class and its stations' leaves at ``bandwidth_mbps`` (``verb``: replace
    or change)."""
    node = topology.bridge
    share_mbps = bandwidth_mbps / len(station_classes(topology))
    commands = [TcCommand(node, _class_argv(verb, HTB_HANDLE, HTB_CLASS, bandwidth_mbps,
                                            bandwidth_mbps, burst_kb))]  # fmt: skip
    for classid, _ in station_classes(topology):
        argv = _class_argv(verb, HTB_CLASS, classid, share_mbps, bandwidth_mbps, burst_kb)
        commands.append(TcCommand(node, argv))
    return commands


def medium_commands(
    topology: EmuTopology, network: NetworkSpec, bandwidth_mbps: float, netem: bool
) -> list[TcCommand]:
    """Create the IFB, shape it (the medium's class, a leaf per station, netem's latency on
    each leaf where the kernel has it), then redirect every station's packets into it."""
    node, dev = topology.bridge, ("dev", MEDIUM_DEVICE)
    default = f"{_ACCESS_POINT_MINOR:x}"
    commands = [
        TcCommand(node, ("ip", "link", "add", MEDIUM_DEVICE, "type", "ifb")),
        TcCommand(node, ("ip", "link", "set", *dev, "txqueuelen", str(QUEUE_PACKETS), "up")),
        TcCommand(node, ("tc", "qdisc", "replace", *dev, "root", "handle", HTB_HANDLE, "htb",
                         "default", default)),
        *_classes(topology, "replace", bandwidth_mbps, network.burst_kb),
    ]  # fmt: skip
    for index, (classid, address) in enumerate(station_classes(topology)):
        if netem and network.latency_ms > 0:
            delay = f"{network.latency_ms:g}ms"
            commands.append(TcCommand(node, ("tc", "qdisc", "replace", *dev, "parent", classid,
                                             "handle", f"{index + 10:x}:", "netem", "delay", delay,
                                             "limit", str(QUEUE_PACKETS))))  # fmt: skip
        if address is not None:
            match = ("u32", "match", "ip", "src", f"{address}/32", "flowid", classid)
            commands.append(TcCommand(node, ("tc", "filter", "add", *dev, "parent", HTB_HANDLE,
                                             "protocol", "ip", "prio", "1", *match)))  # fmt: skip
    redirect = ("u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect",
                *dev)  # fmt: skip
    hooks = [(port, "ingress") for port in (h.bridge_port for h in topology.hosts)]
    for iface, hook in [*hooks, (topology.bridge, "egress")]:
        commands += [
            TcCommand(node, ("tc", "qdisc", "replace", "dev", iface, "clsact")),
            TcCommand(node, ("tc", "filter", "add", "dev", iface, hook, "protocol", "all",
                             *redirect)),
        ]  # fmt: skip
    return commands


def medium_rate_commands(
    topology: EmuTopology, bandwidth_mbps: float, burst_kb: float | None = None
) -> list[TcCommand]:
    """Change the medium's rate in place (its class and every station's share)."""
    return _classes(topology, "change", bandwidth_mbps, burst_kb)


def shaping_commands_of(
    topology: EmuTopology, network: NetworkSpec, bandwidth_mbps: float, netem: bool
) -> list[TcCommand]:
    """Shape the network as its medium says: dedicated links, or the shared medium."""
    if network.medium == "shared":
        return medium_commands(topology, network, bandwidth_mbps, netem)
    return shaping_commands(topology, network, bandwidth_mbps, netem)


def rate_commands_of(
    topology: EmuTopology, network: NetworkSpec, bandwidth_mbps: float
) -> list[TcCommand]:
    """Put the network's shaper(s) at ``bandwidth_mbps`` in place (the scenario's burst)."""
    if network.medium == "shared":
        return medium_rate_commands(topology, bandwidth_mbps, network.burst_kb)
    return rate_commands(topology, bandwidth_mbps, network.burst_kb)


def queues_of(
    topology: EmuTopology, network: NetworkSpec, sender: int, receiver: int
) -> list[tuple[str, str]]:
    """(node, interface) of the shaping classes a packet from ``sender`` to ``receiver``
    crosses: the medium's alone, or its two link queues."""
    if network.medium == "shared":
        return [(topology.bridge, MEDIUM_DEVICE)]
    return path_queues(topology, sender, receiver)
