"""Loss and latency without netem: the pure builders (no root), then for real (root, Mininet):
the measured loss within its binomial tolerance, the delay line's latency, and no rule or
helper left after the network is gone, normally or on an exception."""

from __future__ import annotations

import math
import struct
from dataclasses import replace
from pathlib import Path

import pytest
from emu_checks import needs_emulator, teardown_checked

from edgetwin.emu.mininet import delayline
from edgetwin.emu.mininet.checks import LinkCheck, link_check, measure_links
from edgetwin.emu.mininet.delay import (
    DELAY_COMMENT,
    DELAY_MODULE,
    delay_line_argv,
    delay_rule_command,
    mean_rtt_ms,
    ping_command,
)
from edgetwin.emu.mininet.loss import (
    LOSS_COMMENT,
    LOSS_Z,
    loss_commands,
    loss_tolerance_pct,
    lost_probes,
    probe_argv,
    probe_duration_s,
)
from edgetwin.emu.mininet.net import emulated_network, leftover_processes
from edgetwin.emu.mininet.topology import build_topology
from edgetwin.errors import InputError
from edgetwin.network_spec import NetworkSpec
from edgetwin.scenario import validate_scenario


def test_loss_rules_drop_on_arrival_in_every_host_with_offloads_off() -> None:
    topology = build_topology(2)
    commands = [(c.node, " ".join(c.argv)) for c in loss_commands(topology, 2.5)]
    assert commands[:2] == [
        ("etwh0", "ethtool -K etwh0-eth0 tso off gso off gro off"),
        ("etws0", "ethtool -K etws0-eth1 tso off gso off gro off"),
    ]
    rules = [(node, argv) for node, argv in commands if argv.startswith("iptables")]
    assert rules == [
        (
            host.name,
            f"iptables -A INPUT -i {host.iface} -m statistic --mode random --probability 0.025"
            f" -m comment --comment {LOSS_COMMENT} -j DROP",
        )
        for host in topology.hosts
    ]  # one rule per receiver: a packet between two hosts crosses one
    assert loss_commands(topology, 0) == []


def test_loss_tolerance_is_binomial_spread() -> None:
    assert loss_tolerance_pct(5, 4000) == pytest.approx(
        100 * LOSS_Z * math.sqrt(0.05 * 0.95 / 4000)
    )
    assert loss_tolerance_pct(5, 16000) == pytest.approx(loss_tolerance_pct(5, 4000) / 2)
    assert loss_tolerance_pct(0, 100) == 0
    with pytest.raises(ValueError, match="needs probes"):
        loss_tolerance_pct(5, 0)


def test_loss_probes_are_counted_udp_datagrams_below_the_link_rate() -> None:
    argv = probe_argv("10.77.0.1", 5201, 8, reverse=True, probes=300)
    assert argv[argv.index("--bitrate") + 1] == "2M"  # a quarter of an 8 Mbps link
    assert {"--udp", "--reverse"} <= set(argv) and argv[argv.index("--blockcount") + 1] == "300"
    assert probe_duration_s(8, 300) == pytest.approx(300 * 100 * 8 / 2e6)
    report = '{"end": {"sum": {"lost_packets": 7, "packets": 300, "lost_percent": 2.3}}}'
    assert lost_probes(report) == (7, 300)
    with pytest.raises(ValueError, match="unable to connect"):
        lost_probes('{"error": "unable to connect to server"}')


def test_loss_warning_only_outside_its_tolerance() -> None:
    check = link_check(200, "etwh1", "etwh0", 191.0)
    assert check.loss_warning() is None  # no loss set
    fair = replace(check, loss_pct=5, loss_measured_pct=5.4, loss_tolerance_pct=1.4,
                   loss_within_tolerance=True)  # fmt: skip
    assert fair.loss_warning() is None
    off = replace(fair, loss_measured_pct=9.0, loss_within_tolerance=False)
    assert off.loss_warning() == (
        "link etwh1 -> etwh0 set to 5 % loss lost 9.00 % of its probes (tolerance 1.40 points)"
    )


def test_loss_pct_out_of_range_names_the_field() -> None:
    raw = {"name": "x", "devices": [{"name": "a", "profile": "jetson_orin_nano", "count": 2}],
           "strategies": [{"name": "single"}], "network": {"loss_pct": 100}}  # fmt: skip
    with pytest.raises(InputError, match=r"network\.loss_pct.*less than 100"):
        validate_scenario(raw, Path("s.yaml"))
    raw["network"] = {"loss_pct": 2.5}
    assert validate_scenario(raw, Path("s.yaml")).network.loss_pct == 2.5


def test_the_delay_line_is_fed_after_the_loss_rule_and_watches_its_parent() -> None:
    host = build_topology(2).hosts[1]
    rule = " ".join(delay_rule_command(host).argv)
    assert rule == (
        f"iptables -A INPUT -i etwh1-eth0 -m comment --comment {DELAY_COMMENT}"
        " -j NFQUEUE --queue-num 0"
    )  # appended: after the loss rule (loss_commands run first)
    argv = delay_line_argv(2.5, 4242)
    assert argv[1:3] == ["-m", DELAY_MODULE] and argv[-4:] == [
        "--delay-ms",
        "2.5",
        "--parent-pid",
        "4242",
    ]
    assert "-U" in ping_command(host, "10.77.0.1").argv  # user to user: after the delay line
    assert mean_rtt_ms("rtt min/avg/max/mdev = 10.1/10.4/12.0/0.3 ms\n") == 10.4
    with pytest.raises(ValueError, match="no round trip"):
        mean_rtt_ms("1 packets transmitted, 0 received, 100% packet loss")


def _packet_message(packet_id: int) -> bytes:
    """A queue's packet message as the kernel sends it: header, nfgenmsg, packet header."""
    attr = struct.pack("=HH", 11, delayline.NFQA_PACKET_HDR) + struct.pack(
        ">IHB", packet_id, 0x800, 1
    )
    body = struct.pack("=BBH", 2, 0, 0) + attr + b"\0"  # padded to 4
    kind = (delayline.NFNL_SUBSYS_QUEUE << 8) | delayline.NFQNL_MSG_PACKET
    return struct.pack("=IHHII", 16 + len(body), kind, 0, 0, 0) + body


def test_the_delay_line_reads_packet_ids_and_errors_and_accepts_up_to_an_id() -> None:
    assert delayline.packet_ids(_packet_message(7) + _packet_message(8)) == [7, 8]
    ack = (
        struct.pack("=IHHII", 36, delayline.NLMSG_ERROR, 0, 1, 0) + struct.pack("=i", 0) + bytes(16)
    )
    assert delayline.packet_ids(ack) == []
    refused = struct.pack("=IHHII", 36, delayline.NLMSG_ERROR, 0, 1, 0) + struct.pack("=i", -16)
    with pytest.raises(OSError, match="busy"):
        delayline.packet_ids(refused + bytes(16))
    verdict = delayline.batch_verdict(3, 41)
    length, kind = struct.unpack_from("=IH", verdict)
    assert length == len(verdict) and kind == (3 << 8) | delayline.NFQNL_MSG_VERDICT_BATCH
    assert struct.unpack_from(">H", verdict, 18) == (3,)  # the queue, big-endian
    assert struct.unpack_from(">II", verdict, 24) == (delayline.NF_ACCEPT, 41)


def _delay_lines() -> list[int]:
    return [pid for pid in leftover_processes() if _runs_delay_line(pid)]


def _runs_delay_line(pid: int) -> bool:
    try:
        return DELAY_MODULE.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


class _Stop(Exception):
    pass


@needs_emulator
@pytest.mark.timeout(300)
def test_loss_and_latency_are_measured_and_leave_nothing() -> None:
    """2 hosts at 200 Mbps, 5 % loss, 3 ms: every direction's measured loss within its
    binomial tolerance, its latency at least the set one; then a network torn down by an
    exception. No rule in this namespace, no delay line, no interface left (checked while
    the runs hold the emulator lock)."""
    network = NetworkSpec(latency_ms=3, loss_pct=5)
    with teardown_checked() as teardown:
        with emulated_network(build_topology(2), network, 200) as net:
            assert net.latency_emulated
            if not net.netem:
                assert len(_delay_lines()) == 2  # one per host
            checks: list[LinkCheck] = measure_links(net, 200, range(1, 2), 1.0)
        with pytest.raises(_Stop), emulated_network(build_topology(2), network, 200) as net:
            assert net.netem or len(_delay_lines()) == 2
            raise _Stop
    teardown.assert_clean(networks=2)  # no rule here, no process (delay lines) left
    assert len(checks) == 2
    for check in checks:
        assert check.loss_pct == 5 and check.loss_within_tolerance, check
        assert check.loss_measured_pct is not None and check.loss_measured_pct > 0
        assert check.latency_emulated
        assert check.latency_measured_ms is not None and check.latency_measured_ms >= 3, check


@needs_emulator
@pytest.mark.timeout(300)
def test_every_link_check_row_carries_the_loss_it_was_set_to() -> None:
    """On the shared medium the two-sender rows too (their probes are the one-sender rows'):
    they said ``loss_pct`` 0 while every link dropped 2 %."""
    network = NetworkSpec(loss_pct=2, medium="shared")
    with emulated_network(build_topology(2), network, 200) as net:
        checks = measure_links(net, 200, range(1, 2), 1.0)
    assert [check.flows for check in checks] == [1, 1, 2, 2]
    assert all(check.loss_pct == 2 for check in checks), checks
    shared = [check for check in checks if check.flows == 2]
    assert all(check.loss_measured_pct is None for check in shared)  # measured alone
