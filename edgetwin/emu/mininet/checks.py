"""Link check: what each shaped link really carries, measured with iperf3 (TCP).

htb shapes whole Ethernet frames; iperf3 reports TCP goodput. With a 1500-byte MTU a
full frame (1514 bytes on the wire) carries 1448 bytes of payload (TCP timestamps on),
so goodput is ~4.4 % under the set rate by construction; ``wire_mbps`` adds the headers
back and is what is compared with the set rate (tolerance and why: ``edgetwin.links``).
``shaped_mbps`` is the rate tc reports for the queues the direction crosses (the lower
of the two): what the shaper was told, read back.
"""

from __future__ import annotations

import csv
import json
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from edgetwin.emu.mininet.net import EmuError, EmuNetwork
from edgetwin.emu.mininet.topology import class_show_command, parse_class_rate_mbps, path_queues
from edgetwin.links import link_warning, within_tolerance

IPERF_PORT = 5201
FRAME_BYTES = 1514  # Ethernet header + 1500-byte IP packet
PAYLOAD_BYTES = 1448  # 1500 - 20 (IP) - 32 (TCP with timestamps)
_CONNECT_TRIES = 20
_CONNECT_WAIT_S = 0.1


@dataclass(frozen=True)
class LinkCheck:
    """One direction between two hosts at one set rate; a row of ``link_check.csv``."""

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

    def warning(self) -> str | None:
        """The warning line when the wire rate is outside the tolerance, else None."""
        if self.within_tolerance:
            return None
        return link_warning(
            self.bandwidth_mbps, self.sender, self.receiver, self.wire_mbps, self.error_pct
        )


def link_check(
    bandwidth_mbps: float,
    sender: str,
    receiver: str,
    goodput_mbps: float,
    latency_ms: float = 0.0,
    latency_emulated: bool = False,
    shaped_mbps: float | None = None,
) -> LinkCheck:
    """A check from iperf3's goodput: wire rate and its error against the set rate."""
    wire_mbps = goodput_mbps * FRAME_BYTES / PAYLOAD_BYTES
    error_pct = 100 * (wire_mbps - bandwidth_mbps) / bandwidth_mbps
    return LinkCheck(
        bandwidth_mbps, sender, receiver, goodput_mbps, wire_mbps, error_pct,
        within_tolerance(error_pct), latency_ms, latency_emulated, shaped_mbps,
    )  # fmt: skip


def server_argv(ip: str) -> list[str]:
    return ["iperf3", "--server", "--bind", ip, "--port", str(IPERF_PORT)]


def client_argv(server_ip: str, duration_s: float, reverse: bool) -> list[str]:
    """A TCP test of ``duration_s`` after a one-second warm-up left out of the result (JSON)."""
    return [
        *("iperf3", "--client", server_ip, "--port", str(IPERF_PORT), "--json"),
        *("--time", f"{duration_s:g}", "--omit", "1"),
        *(("--reverse",) if reverse else ()),
    ]


def goodput_mbps(report: str) -> float:
    """Received goodput of an iperf3 ``--json`` report; ``ValueError`` if it holds an error."""
    data = json.loads(report)
    if "error" in data:
        raise ValueError(data["error"])
    return float(data["end"]["sum_received"]["bits_per_second"]) / 1e6


def measure_links(
    net: EmuNetwork, bandwidth_mbps: float, ranks: range, duration_s: float
) -> list[LinkCheck]:
    """Both directions between host 0 and each host of ``ranks`` (one at a time)."""
    hosts = net.topology.hosts
    server = net.popen(0, server_argv(hosts[0].ip), None)
    try:
        checks = []
        for rank in ranks:
            for reverse in (False, True):
                goodput = _client(net, rank, hosts[0].ip, duration_s, reverse)
                ends = (0, rank) if reverse else (rank, 0)
                shaped = min(
                    _class_rate_mbps(net, node, iface)
                    for node, iface in path_queues(net.topology, *ends)
                )
                sender, receiver = (hosts[end].name for end in ends)
                latency_ms = net.network.latency_ms
                checks.append(
                    link_check(
                        bandwidth_mbps, sender, receiver, goodput, latency_ms, net.netem, shaped
                    )
                )
        return checks
    finally:
        server.kill()
        server.wait()


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


def _client(net: EmuNetwork, rank: int, server_ip: str, duration_s: float, reverse: bool) -> float:
    """Run the client, retrying while the server is not listening yet."""
    for _ in range(_CONNECT_TRIES):
        client = net.popen(rank, client_argv(server_ip, duration_s, reverse), None)
        out, _ = client.communicate(timeout=duration_s + 30)
        try:
            return goodput_mbps(out.decode())
        except ValueError as exc:
            error = str(exc)
        time.sleep(_CONNECT_WAIT_S)
    raise EmuError(f"iperf3 from host {rank} to {server_ip} failed: {error}")
