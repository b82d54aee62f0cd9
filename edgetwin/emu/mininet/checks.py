"""Link check: what each shaped link really carries, measured with iperf3 (TCP).

htb shapes whole Ethernet frames; iperf3 reports TCP goodput. With a 1500-byte MTU a
full frame (1514 bytes on the wire) carries 1448 bytes of payload (TCP timestamps on),
so goodput is ~4.4 % under the set rate by construction; ``wire_mbps`` adds the headers
back and is what is compared with the set rate (tolerance and why: ``edgetwin.links``).
``shaped_mbps`` is the rate tc reports for the queues the direction crosses (the lower
of the two): what the shaper was told, read back. With latency emulated, ping measures
it (``latency_measured_ms``: half the mean round trip); with loss, iperf3's UDP probes
measure it (``loss_measured_pct``, its binomial tolerance: ``edgetwin.emu.mininet.loss``).
"""

from __future__ import annotations

import csv
import json
import subprocess
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from edgetwin.emu.mininet.delay import mean_rtt_ms, ping_command
from edgetwin.emu.mininet.loss import (
    LOSS_PROBES,
    PROBE_SETUP_S,
    loss_tolerance_pct,
    lost_probes,
    probe_argv,
    probe_duration_s,
)
from edgetwin.emu.mininet.net import EmuError, EmuNetwork
from edgetwin.emu.mininet.topology import (
    EmuHost,
    class_show_command,
    parse_class_rate_mbps,
    path_queues,
)
from edgetwin.links import link_warning, within_tolerance

IPERF_PORT = 5201
FRAME_BYTES = 1514  # Ethernet header + 1500-byte IP packet
PAYLOAD_BYTES = 1448  # 1500 - 20 (IP) - 32 (TCP with timestamps)
_CONNECT_TRIES = 20
_CONNECT_WAIT_S = 0.1
_CLIENT_SETUP_S = 30.0  # an iperf3 client's time beyond its test: connecting, reporting


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
    latency_measured_ms: float | None = None
    loss_pct: float = 0.0
    loss_measured_pct: float | None = None
    loss_tolerance_pct: float | None = None
    loss_within_tolerance: bool | None = None

    def warning(self) -> str | None:
        """The warning line when the wire rate is outside the tolerance, else None."""
        if self.within_tolerance:
            return None
        return link_warning(
            self.bandwidth_mbps, self.sender, self.receiver, self.wire_mbps, self.error_pct
        )

    def loss_warning(self) -> str | None:
        """The warning line when the measured loss is outside its tolerance, else None."""
        if self.loss_within_tolerance is not False:
            return None
        return (
            f"link {self.sender} -> {self.receiver} set to {self.loss_pct:g} % loss lost "
            f"{self.loss_measured_pct:.2f} % of its probes (tolerance "
            f"{self.loss_tolerance_pct:.2f} points)"
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
                check = link_check(bandwidth_mbps, sender, receiver, goodput, latency_ms,
                                   net.latency_emulated, shaped)  # fmt: skip
                checks.append(_with_latency_and_loss(net, check, ends, reverse))
        return checks
    finally:
        server.kill()
        server.wait()


def _with_latency_and_loss(
    net: EmuNetwork, check: LinkCheck, ends: tuple[int, int], reverse: bool
) -> LinkCheck:
    """``check`` with the latency measured by ping (if emulated) and the loss by UDP probes
    (if set), from ``ends[0]`` to ``ends[1]``; the iperf3 server is host 0."""
    hosts = net.topology.hosts
    sender, receiver = (hosts[end] for end in ends)
    loss_pct = net.network.loss_pct
    latency = _latency_ms(net, sender, receiver) if net.latency_emulated else None
    if loss_pct <= 0:
        return replace(check, latency_measured_ms=latency)
    client = ends[1] if reverse else ends[0]
    argv = probe_argv(hosts[0].ip, IPERF_PORT, check.bandwidth_mbps, reverse, LOSS_PROBES)
    duration_s = probe_duration_s(check.bandwidth_mbps)
    what = f"UDP probes from host {client}"
    report = _iperf3(net, client, argv, duration_s, what, PROBE_SETUP_S)
    lost, sent = lost_probes(report)
    measured = 100 * lost / sent
    tolerance = loss_tolerance_pct(loss_pct, sent)
    return replace(
        check, latency_measured_ms=latency, loss_pct=loss_pct, loss_measured_pct=measured,
        loss_tolerance_pct=tolerance, loss_within_tolerance=abs(measured - loss_pct) <= tolerance,
    )  # fmt: skip


def _latency_ms(net: EmuNetwork, sender: EmuHost, receiver: EmuHost) -> float | None:
    """Half ping's mean round trip; None when no ping came back (ping exits 1: heavy loss)."""
    try:
        return mean_rtt_ms(net.output(ping_command(sender, receiver.ip))) / 2
    except (EmuError, ValueError):
        return None


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
    argv = client_argv(server_ip, duration_s, reverse)
    what = f"iperf3 from host {rank} to {server_ip}"
    return goodput_mbps(_iperf3(net, rank, argv, duration_s, what))


def _iperf3(
    net: EmuNetwork,
    rank: int,
    argv: list[str],
    duration_s: float,
    what: str,
    setup_s: float = _CLIENT_SETUP_S,
) -> str:
    """The JSON report of the iperf3 client ``argv`` on host ``rank``, retried while the
    server is not listening yet (or is still busy with the last test), or when the client
    has not reported ``setup_s`` after its test's ``duration_s`` (killed first)."""
    for _ in range(_CONNECT_TRIES):
        client = net.popen(rank, argv, None)
        try:
            out, _ = client.communicate(timeout=duration_s + setup_s)
        except subprocess.TimeoutExpired:
            client.kill()
            client.communicate()
            error = f"no report {duration_s + setup_s:g} s after it started"
            continue
        report = out.decode()
        try:
            if "error" not in json.loads(report):
                return report
            error = json.loads(report)["error"]
        except ValueError as exc:
            error = str(exc)
        time.sleep(_CONNECT_WAIT_S)
    raise EmuError(f"{what} failed: {error}")
