"""Link check: what each shaped link really carries, measured with iperf3 (TCP).

htb shapes whole Ethernet frames; iperf3 reports TCP goodput. With a 1500-byte MTU a
full frame (1514 bytes on the wire) carries 1448 bytes of payload (TCP timestamps on),
so goodput is ~4.4 % under the set rate by construction; ``wire_mbps`` adds the headers
back and is what is compared with the set rate (tolerance and why: ``edgetwin.links``).
``shaped_mbps`` is the rate tc reports for the queues the direction crosses (the lower
of the two; the shared medium's one class): what the shaper was told, read back.

On the shared medium (``network.medium: shared``) the same one-sender checks show that a
sender alone gets the whole medium; then two senders at once (``sharing_pairs``: two
host pairs, iperf3 side by side) show that each gets half (``flows`` 2: ``error_pct``
is against the share, the medium's rate / ``flows``), so their sum is the rate.
"""

from __future__ import annotations

import csv
import json
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from edgetwin.emu.mininet.medium import queues_of
from edgetwin.emu.mininet.net import EmuError, EmuNetwork
from edgetwin.emu.mininet.topology import class_show_command, parse_class_rate_mbps
from edgetwin.links import link_warning, within_tolerance

IPERF_PORT = 5201
FRAME_BYTES = 1514  # Ethernet header + 1500-byte IP packet
PAYLOAD_BYTES = 1448  # 1500 - 20 (IP) - 32 (TCP with timestamps)
_CONNECT_TRIES = 20
_CONNECT_WAIT_S = 0.1


@dataclass(frozen=True)
class LinkCheck:
    """One direction between two hosts at one set rate, one of ``flows`` senders at once
    on it; a row of ``link_check.csv``."""

    bandwidth_mbps: float
    sender: str
    receiver: str
    goodput_mbps: float
    wire_mbps: float
    error_pct: float
    within_tolerance: bool
    latency_ms: float
    latency_emulated: bool
    shaped_mbps: float | None = None
    flows: int = 1

    def warning(self) -> str | None:
        """The warning line when the wire rate is outside the tolerance, else None."""
        if self.within_tolerance:
            return None
        return link_warning(
            self.bandwidth_mbps, self.sender, self.receiver, self.wire_mbps, self.error_pct,
            self.flows,
        )  # fmt: skip


def link_check(
    bandwidth_mbps: float,
    sender: str,
    receiver: str,
    goodput_mbps: float,
    latency_ms: float = 0.0,
    latency_emulated: bool = False,
    shaped_mbps: float | None = None,
    flows: int = 1,
) -> LinkCheck:
    """A check from iperf3's goodput: wire rate and its error against the set rate's share
    (the rate / ``flows``, the senders on it at once)."""
    wire_mbps = goodput_mbps * FRAME_BYTES / PAYLOAD_BYTES
    share_mbps = bandwidth_mbps / flows
    error_pct = 100 * (wire_mbps - share_mbps) / share_mbps
    return LinkCheck(
        bandwidth_mbps, sender, receiver, goodput_mbps, wire_mbps, error_pct,
        within_tolerance(error_pct), latency_ms, latency_emulated, shaped_mbps, flows,
    )  # fmt: skip


def server_argv(ip: str, port: int = IPERF_PORT) -> list[str]:
    return ["iperf3", "--server", "--bind", ip, "--port", str(port)]


def client_argv(server_ip: str, duration_s: float, port: int = IPERF_PORT) -> list[str]:
    """A TCP test sending to ``server_ip`` for ``duration_s`` after a one-second warm-up left
    out of the result (JSON)."""
    return [
        *("iperf3", "--client", server_ip, "--port", str(port), "--json"),
        *("--time", f"{duration_s:g}", "--omit", "1"),
    ]


def goodput_mbps(report: str) -> float:
    """Received goodput of an iperf3 ``--json`` report; ``ValueError`` if it holds an error."""
    data = json.loads(report)
    if "error" in data:
        raise ValueError(data["error"])
    return float(data["end"]["sum_received"]["bits_per_second"]) / 1e6


def sharing_pairs(hosts: int) -> list[tuple[int, int]]:
    """(sender, receiver) of the two flows that check the shared medium's split: two
    senders whose stations carry the same (their data; the acknowledgements on the
    receivers' or on both alike)."""
    if hosts < 2:
        return []
    if hosts == 2:
        return [(1, 0), (0, 1)]
    if hosts == 3:
        return [(1, 0), (2, 0)]
    return [(1, 0), (3, 2)]


def measure_links(
    net: EmuNetwork, bandwidth_mbps: float, ranks: range, duration_s: float
) -> list[LinkCheck]:
    """Both directions between host 0 and each host of ``ranks`` (one at a time); on the
    shared medium then two senders at once (``sharing_pairs`` of the network's hosts)."""
    checks = []
    for rank in ranks:
        for ends in ((rank, 0), (0, rank)):
            checks += _measure_flows(net, bandwidth_mbps, [ends], duration_s)
    pairs = sharing_pairs(len(net.topology.hosts))
    if net.network.medium == "shared" and pairs:
        checks += _measure_flows(net, bandwidth_mbps, pairs, duration_s)
    return checks


def _measure_flows(
    net: EmuNetwork, bandwidth_mbps: float, pairs: list[tuple[int, int]], duration_s: float
) -> list[LinkCheck]:
    """One iperf3 flow per (sender, receiver) pair, all at once, each to a server of its own
    on the receiver (flow i on port ``IPERF_PORT`` + i)."""
    hosts = net.topology.hosts
    servers = [
        net.popen(receiver, server_argv(hosts[receiver].ip, IPERF_PORT + i), None)
        for i, (_, receiver) in enumerate(pairs)
    ]
    try:
        goodputs = _clients(net, pairs, duration_s)
    finally:
        for server in servers:
            server.kill()
            server.wait()
    checks = []
    for (sender, receiver), goodput in zip(pairs, goodputs, strict=True):
        shaped = min(
            _class_rate_mbps(net, node, iface)
            for node, iface in queues_of(net.topology, net.network, sender, receiver)
        )
        checks.append(
            link_check(
                bandwidth_mbps, hosts[sender].name, hosts[receiver].name, goodput,
                net.network.latency_ms, net.netem, shaped, flows=len(pairs),
            )
        )  # fmt: skip
    return checks


def write_link_checks(path: Path, checks: list[LinkCheck]) -> None:
    """``link_check.csv``: one row per check, columns as ``LinkCheck``."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, [f.name for f in fields(LinkCheck)], lineterminator="\n")
        writer.writeheader()
        writer.writerows(asdict(check) for check in checks)


def _class_rate_mbps(net: EmuNetwork, node: str, iface: str) -> float:
    """The rate tc reports for ``iface``'s shaping class."""
    listing = net.output(class_show_command(node, iface))
    try:
        return parse_class_rate_mbps(listing)
    except ValueError as exc:
        raise EmuError(f"{iface} on {node}: {exc}") from None


def _clients(net: EmuNetwork, pairs: list[tuple[int, int]], duration_s: float) -> list[float]:
    """Goodput of every pair's client, all started at once; all again while a server is
    not listening yet (a flow measured alone would not be measured beside the others)."""
    hosts = net.topology.hosts
    for _ in range(_CONNECT_TRIES):
        clients = []
        for i, (sender, receiver) in enumerate(pairs):
            argv = client_argv(hosts[receiver].ip, duration_s, IPERF_PORT + i)
            clients.append(net.popen(sender, argv, None))
        outs = [client.communicate(timeout=duration_s + 30)[0] for client in clients]
        try:
            return [goodput_mbps(out.decode()) for out in outs]
        except ValueError as exc:
            error = str(exc)
        time.sleep(_CONNECT_WAIT_S)
    raise EmuError(f"iperf3 between hosts {pairs} failed: {error}")
