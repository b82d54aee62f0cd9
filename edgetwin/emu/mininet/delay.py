"""Latency without netem: a userspace delay line per host (``delayline``), pure commands.

Where the kernel has no netem, every host runs ``python -m edgetwin.emu.mininet.delayline``
and an iptables rule in its INPUT chain hands what arrives on its interface to it
(NFQUEUE); it holds each packet for ``latency_ms`` and lets it go on. A packet between
two hosts crosses one receiver's delay line, so ``latency_ms`` is the one-way latency
(as in the twin); a round trip adds twice it. The delay sits at the receiver, not the
sender: a sender's packets held in its own stack count against TCP's small-queue
limit (about a millisecond of data per socket), which caps a delayed sender at that
limit per delay (measured 9 Mbps at 5 ms), whereas received packets belong to no
socket. ``ping -U`` measures it (user to user: ping's default kernel receive stamp is
taken before the receiver's delay line).
"""

from __future__ import annotations

import re
import sys

from edgetwin.emu.mininet.topology import PREFIX, EmuHost, TcCommand

DELAY_COMMENT = f"{PREFIX}-delay"  # marks the rules (iptables -m comment)
DELAY_QUEUE = 0  # one queue per host: each host has a network namespace of its own
DELAY_MODULE = "edgetwin.emu.mininet.delayline"
PING_PROBES = 20
_RTT = re.compile(r"rtt min/avg/max/mdev = ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms")


def delay_line_argv(latency_ms: float, parent_pid: int) -> list[str]:
    """The helper process of one host (it exits when ``parent_pid`` is gone)."""
    return [
        *(sys.executable, "-m", DELAY_MODULE, "--queue", str(DELAY_QUEUE)),
        *("--delay-ms", f"{latency_ms:g}", "--parent-pid", str(parent_pid)),
    ]


def delay_rule_command(host: EmuHost) -> TcCommand:
    """Hand everything arriving on the host's interface to its delay line (appended after
    the loss rule: a lost packet is not delayed)."""
    return TcCommand(
        host.name,
        (
            *("iptables", "-A", "INPUT", "-i", host.iface, "-m", "comment"),
            *("--comment", DELAY_COMMENT, "-j", "NFQUEUE", "--queue-num", str(DELAY_QUEUE)),
        ),
    )


def ping_command(host: EmuHost, target_ip: str) -> TcCommand:
    """``PING_PROBES`` pings, 10 ms apart, timed user to user (``-U``)."""
    return TcCommand(
        host.name,
        ("ping", "-U", "-q", "-c", str(PING_PROBES), "-i", "0.01", "-W", "2", target_ip),
    )


def mean_rtt_ms(ping_output: str) -> float:
    """The mean round trip of ping's summary line; ``ValueError`` without one."""
    match = _RTT.search(ping_output)
    if match is None:
        raise ValueError(f"no round trip in ping's output: {ping_output.strip()[-200:]!r}")
    return float(match.group(2))
