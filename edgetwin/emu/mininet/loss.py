"""Packet loss without netem, and how well a link check can measure it: pure, no root.

Each host drops what arrives on its interface with probability ``loss_pct`` / 100
(iptables' ``statistic`` match in the host's INPUT chain), so a packet from one host to
another crosses exactly one rule: ``loss_pct`` is the end-to-end loss per packet between
two hosts, in each direction (a lost packet has used the link, as a lost WiFi frame has
used airtime). The rule counts packets, so with loss every link's segmentation and
coalescing offloads are off (``ethtool``): without that a 64 KB TCP super-packet would
be one packet to the rule and 44 on a wire.

The link check sends ``LOSS_PROBES`` UDP datagrams each way (iperf3) and counts those
lost. The count is binomial, so the measured rate's standard deviation is
sqrt(p (1 - p) / n); a check is within tolerance when it is within ``LOSS_Z`` of them
of the set rate (a fair rule fails such a check about 6 times in 100,000).
"""

from __future__ import annotations

import json
import math

from edgetwin.emu.mininet.topology import PREFIX, EmuTopology, TcCommand

LOSS_COMMENT = f"{PREFIX}-loss"  # marks the rules (iptables -m comment)
LOSS_PROBES = 4000
LOSS_Z = 4.0
PROBE_BYTES = 100  # UDP payload of a probe: loss is per packet, size does not matter
PROBE_MAX_MBPS = 5.0
# the receiver's socket buffer for them: a delay line held up by other work on the machine
# lets its packets go at once, and a default buffer (~280 probes) overflows (measured: 1515
# of 4000 probes lost in the socket, counted as lost by iperf3); net.core.rmem_max caps it
PROBE_BUFFER = "4M"
# iperf3 (3.12) opens a UDP test with one datagram each way, which the rule may drop too;
# its client then waits for ever: the check kills it this long after the probes' time
# and tries again (measured: 2 of 34 UDP tests at 5 % loss hung, 30 s each, before this)
PROBE_SETUP_S = 5.0
OFFLOADS = ("tso", "gso", "gro")


def loss_commands(topology: EmuTopology, loss_pct: float) -> list[TcCommand]:
    """Offloads off on both ends of every link, then in every host a rule dropping what
    arrives on its interface with probability ``loss_pct`` / 100; none without loss."""
    if loss_pct <= 0:
        return []
    offloads = tuple(word for name in OFFLOADS for word in (name, "off"))
    commands = []
    for host in topology.hosts:
        commands += [
            TcCommand(host.name, ("ethtool", "-K", host.iface, *offloads)),
            TcCommand(topology.bridge, ("ethtool", "-K", host.bridge_port, *offloads)),
        ]
    commands += [
        TcCommand(
            host.name,
            (
                *("iptables", "-A", "INPUT", "-i", host.iface),
                *("-m", "statistic", "--mode", "random", "--probability", f"{loss_pct / 100:.6g}"),
                *("-m", "comment", "--comment", LOSS_COMMENT, "-j", "DROP"),
            ),
        )
        for host in topology.hosts
    ]
    return commands


def loss_tolerance_pct(loss_pct: float, probes: int) -> float:
    """How far (percentage points) a fair measurement of ``probes`` packets may fall from
    ``loss_pct``: ``LOSS_Z`` binomial standard deviations."""
    if probes <= 0:
        raise ValueError(f"a loss measurement needs probes, not {probes}")
    p = loss_pct / 100
    return 100 * LOSS_Z * math.sqrt(p * (1 - p) / probes)


def probe_rate_mbps(bandwidth_mbps: float) -> float:
    """The probes' rate: a quarter of the link at most, so no queue overflows and every
    lost probe is the rule's."""
    return min(PROBE_MAX_MBPS, bandwidth_mbps / 4)


def probe_duration_s(bandwidth_mbps: float, probes: int = LOSS_PROBES) -> float:
    """How long sending ``probes`` takes at the probes' rate (UDP and IP headers aside)."""
    return probes * PROBE_BYTES * 8 / (probe_rate_mbps(bandwidth_mbps) * 1e6)


def probe_argv(
    server_ip: str, port: int, bandwidth_mbps: float, reverse: bool, probes: int = LOSS_PROBES
) -> list[str]:
    """iperf3 sending ``probes`` UDP datagrams (to the server, or from it if ``reverse``)."""
    return [
        *("iperf3", "--client", server_ip, "--port", str(port), "--json", "--udp"),
        *("--bitrate", f"{probe_rate_mbps(bandwidth_mbps):g}M", "--length", str(PROBE_BYTES)),
        *("--window", PROBE_BUFFER),
        *("--blockcount", str(probes), *(("--reverse",) if reverse else ())),
    ]


def lost_probes(report: str) -> tuple[int, int]:
    """(lost, sent) datagrams of an iperf3 ``--udp --json`` report; ``ValueError`` if it
    holds an error."""
    data = json.loads(report)
    if "error" in data:
        raise ValueError(data["error"])
    summary = data["end"]["sum"]
    return int(summary["lost_packets"]), int(summary["packets"])
