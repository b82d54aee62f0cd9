"""Link check: what each shaped link really carries, measured with iperf3 (TCP).

htb shapes whole Ethernet frames; iperf3 reports TCP goodput. With a 1500-byte MTU a
full frame (1514 bytes on the wire) carries 1448 bytes of payload (TCP timestamps on),
so goodput is ~4.4 % under the set rate by construction; ``wire_mbps`` adds the headers
back and is what is compared with the set rate (tolerance and why: ``edgetwin.links``).
``shaped_mbps`` is the rate tc reports for the shaped queues the direction crosses (the
lower of the two; one where the other end is a crowd's foreman, whose link is not shaped;
the shared medium's one class): what the shaper was told, read back.
With latency emulated, ping measures it (``latency_measured_ms``: half the mean round
trip); with loss, iperf3's UDP probes measure it (``loss_measured_pct``, its binomial
tolerance: ``edgetwin.emu.mininet.loss``).

On the shared medium (``network.medium: shared``) the same one-sender checks show that a
sender alone gets the whole medium; then two senders at once (``sharing_pairs``: two
host pairs, iperf3 side by side) show that each gets half (``flows`` 2: ``error_pct``
is against the share, the medium's rate / ``flows``), so their sum is the rate.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from edgetwin.comparison import relative_pct
from edgetwin.emu.mininet.delay import mean_rtt_ms, ping_command
from edgetwin.emu.mininet.loss import (
    LOSS_PROBES,
    PROBE_SETUP_S,
    loss_tolerance_pct,
    lost_probes,
    probe_argv,
    probe_duration_s,
)
from edgetwin.emu.mininet.medium import FRAME_BYTES, queues_of
from edgetwin.emu.mininet.net import EmuError, EmuNetwork
from edgetwin.emu.mininet.topology import EmuHost, class_show_command, parse_class_rate_mbps
from edgetwin.links import link_warning, within_tolerance
from edgetwin.number_text import exact_text, figure_text
from edgetwin.progress import Steps, no_progress
from edgetwin.run_folders import EMU, run_folder

IPERF_PORT = 5201
PAYLOAD_BYTES = 1448  # a full frame's TCP payload: 1500 - 20 (IP) - 32 (TCP with timestamps)
_CONNECT_TRIES = 20
_CONNECT_WAIT_S = 0.1
_CLIENT_SETUP_S = 30.0  # an iperf3 client's time beyond its test: connecting, reporting
_GO_POLL_S = 0.005  # how often a client waiting to start looks for the go file


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
            self.bandwidth_mbps, self.sender, self.receiver, self.wire_mbps, self.error_pct,
            self.flows,
        )  # fmt: skip

    def loss_warning(self) -> str | None:
        """The warning line when the measured loss is outside its tolerance, else None."""
        if self.loss_within_tolerance is not False:
            return None
        return (
            f"link {self.sender} -> {self.receiver} set to {exact_text(self.loss_pct)} % loss lost "
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
    flows: int = 1,
    loss_pct: float = 0.0,
) -> LinkCheck:
    """A check from iperf3's goodput: wire rate and its error against the set rate's share
    (the rate / ``flows``, the senders on it at once); ``latency_ms`` and ``loss_pct`` are
    what the link was set to."""
    wire_mbps = goodput_mbps * FRAME_BYTES / PAYLOAD_BYTES
    share_mbps = bandwidth_mbps / flows
    error_pct = relative_pct(wire_mbps, share_mbps)
    return LinkCheck(
        bandwidth_mbps, sender, receiver, goodput_mbps, wire_mbps, error_pct,
        within_tolerance(error_pct), latency_ms, latency_emulated, shaped_mbps, flows,
        loss_pct=loss_pct,
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
    net: EmuNetwork,
    bandwidth_mbps: float,
    ranks: range,
    duration_s: float,
    steps: Steps = no_progress,
) -> list[LinkCheck]:
    """Both directions between host 0 and each host of ``ranks`` (one at a time); on the
    shared medium then two senders at once (``sharing_pairs`` of the network's hosts).
    ``steps`` shows how far they are: a step per direction, and one for the pairs (a
    direction takes its ``duration_s`` and a few seconds of probes)."""
    pairs = sharing_pairs(len(net.topology.hosts)) if net.network.medium == "shared" else []
    checks = []
    with steps(
        f"link checks at {exact_text(bandwidth_mbps)} Mbps", 2 * len(ranks) + bool(pairs)
    ) as done:
        for rank in ranks:
            for ends in ((rank, 0), (0, rank)):
                checks += _measure_flows(net, bandwidth_mbps, [ends], duration_s)
                done()
        if pairs:
            checks += _measure_flows(net, bandwidth_mbps, pairs, duration_s)
            done()
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
        checks = []
        for (sender, receiver), goodput in zip(pairs, goodputs, strict=True):
            shaped = min(
                _class_rate_mbps(net, node, iface)
                for node, iface in queues_of(net.topology, net.network, sender, receiver)
            )
            check = link_check(
                bandwidth_mbps, hosts[sender].name, hosts[receiver].name, goodput,
                net.network.latency_ms, net.latency_emulated, shaped, flows=len(pairs),
                loss_pct=net.network.loss_pct,
            )  # fmt: skip
            if len(pairs) == 1:  # latency and loss of one path, not of the medium's split
                check = _with_latency_and_loss(net, check, (sender, receiver), IPERF_PORT + 1)
            checks.append(check)
        return checks
    finally:
        for server in servers:
            server.kill()
            server.wait()


def _with_latency_and_loss(
    net: EmuNetwork, check: LinkCheck, ends: tuple[int, int], port: int
) -> LinkCheck:
    """``check`` with the latency measured by ping (if emulated) and the loss by UDP probes
    (if set), from ``ends[0]`` to an iperf3 server of their own on ``ends[1]`` (at ``port``,
    which no goodput test uses)."""
    hosts = net.topology.hosts
    sender, receiver = (hosts[end] for end in ends)
    loss_pct = net.network.loss_pct
    latency = _latency_ms(net, sender, receiver) if net.latency_emulated else None
    if loss_pct <= 0:
        return replace(check, latency_measured_ms=latency)
    argv = probe_argv(receiver.ip, port, check.bandwidth_mbps, False, LOSS_PROBES)
    duration_s = probe_duration_s(check.bandwidth_mbps)
    what = f"UDP probes from host {ends[0]}"
    report = _iperf3(net, ends, port, argv, duration_s, what, PROBE_SETUP_S)
    lost, sent = lost_probes(report)
    measured = 100 * lost / sent
    tolerance = loss_tolerance_pct(loss_pct, sent)
    return replace(
        check, latency_measured_ms=latency, loss_measured_pct=measured,
        loss_tolerance_pct=tolerance, loss_within_tolerance=abs(measured - loss_pct) <= tolerance,
    )  # fmt: skip


def _latency_ms(net: EmuNetwork, sender: EmuHost, receiver: EmuHost) -> float | None:
    """Half ping's mean round trip; None when no ping came back (ping exits 1: heavy loss)."""
    try:
        return mean_rtt_ms(net.output(ping_command(sender, receiver.ip))) / 2
    except (EmuError, ValueError):
        return None


def link_checks_csv(checks: list[LinkCheck]) -> str:
    """The text of ``link_check.csv``: one row per check, columns as ``LinkCheck``."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, [f.name for f in fields(LinkCheck)], lineterminator="\n")
    writer.writeheader()
    writer.writerows(asdict(check) for check in checks)
    return buffer.getvalue()


def write_link_checks(path: Path, checks: list[LinkCheck]) -> None:
    """``link_check.csv`` (``link_checks_csv``)."""
    path.write_text(link_checks_csv(checks))


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
        with run_folder(EMU, "go") as folder:  # a killed run's is removed by the next
            go = Path(folder) / "go"
            clients = []
            for i, (sender, receiver) in enumerate(pairs):
                argv = client_argv(hosts[receiver].ip, duration_s, IPERF_PORT + i)
                clients.append(net.popen(sender, _after(go, argv), None))
            go.touch()
            timeout_s = duration_s + _CLIENT_SETUP_S
            try:
                outs = [client.communicate(timeout=timeout_s)[0] for client in clients]
            except subprocess.TimeoutExpired:
                for client in clients:
                    client.kill()
                    client.wait()
                problem = "the link is too slow, lossy or delayed for the link check"
                raise EmuError(
                    f"iperf3 between hosts {pairs} did not finish in {exact_text(timeout_s)} s: "
                    f"{problem}"
                ) from None
        try:
            return [goodput_mbps(out.decode()) for out in outs]
        except ValueError as exc:
            error = str(exc)
        time.sleep(_CONNECT_WAIT_S)
    raise EmuError(f"iperf3 between hosts {pairs} failed: {error}")


def _after(go: Path, argv: list[str]) -> list[str]:
    """``argv`` run once the file ``go`` exists: clients started one after another (each
    start takes a host's namespace, tens of ms on a busy machine) then all begin within
    ``_GO_POLL_S``; otherwise the last to start ends alone on the medium and gets more."""
    wait = f'until [ -e "$0" ]; do sleep {_GO_POLL_S:g}; done; exec "$@"'
    return ["sh", "-c", wait, str(go), *argv]


def _iperf3(
    net: EmuNetwork,
    ends: tuple[int, int],
    port: int,
    argv: list[str],
    duration_s: float,
    what: str,
    setup_s: float = _CLIENT_SETUP_S,
) -> str:
    """The JSON report of the iperf3 client ``argv`` on host ``ends[0]``, against a server
    started for it on host ``ends[1]`` (at ``port``). Tried again while the server is not
    listening yet, and with a new server after a try that failed on the server's side or did
    not report ``setup_s`` after its test's ``duration_s`` (killed): on a lossy link a try can
    stall on its control connection, and its server then stays busy with it for tens of
    seconds ("the server is busy running a test")."""
    ip = net.topology.hosts[ends[1]].ip
    server = net.popen(ends[1], server_argv(ip, port), None)
    try:
        for _ in range(_CONNECT_TRIES):
            client = net.popen(ends[0], argv, None)
            try:
                out, _ = client.communicate(timeout=duration_s + setup_s)
            except subprocess.TimeoutExpired:
                client.kill()
                client.communicate()
                error = f"no report {figure_text(duration_s + setup_s)} s after it started"
            else:
                report = out.decode()
                try:
                    error = json.loads(report).get("error", "")
                except ValueError as exc:
                    error = str(exc)
                if not error:
                    return report
                if "connect" in error:  # not listening yet: the same server, a moment later
                    time.sleep(_CONNECT_WAIT_S)
                    continue
            _stop(server)
            server = net.popen(ends[1], server_argv(ip, port), None)
            time.sleep(_CONNECT_WAIT_S)
    finally:
        _stop(server)
    raise EmuError(f"{what} failed: {error}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.kill()
    process.wait()
