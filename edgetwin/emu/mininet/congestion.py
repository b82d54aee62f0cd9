"""TCP congestion control in the hosts: which one their connections use, and
``network.congestion_control`` set on every host's route.

Mininet's hosts inherit the machine's ``net.ipv4.tcp_congestion_control`` (Linux's
default is cubic; a machine may run bbr), and a host cannot set another with ``sysctl``
where ``tcp_allowed_congestion_control`` lacks it; a route's ``congctl`` picks it for
every connection over that route, both ends (docs/emulator.md "Congestion control").
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from edgetwin.emu.mininet.topology import PREFIX_LEN, SUBNET, EmuHost, TcCommand

AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
DEFAULT = "/proc/sys/net/ipv4/tcp_congestion_control"  # a host's own, read inside it
_CONGCTL = re.compile(r"\bcongctl (?:lock )?(\S+)")


def available() -> list[str]:
    """The congestion controls this kernel has now (built in or loaded)."""
    return AVAILABLE.read_text().split()


def load(name: str) -> bool:
    """Whether ``name`` is available, after ``modprobe tcp_<name>`` where it was not."""
    if name in available():
        return True
    modprobe = shutil.which("modprobe")
    if modprobe is not None:
        subprocess.run([modprobe, f"tcp_{name}"], capture_output=True, check=False)
    return name in available()


def route_command(host: EmuHost, name: str) -> TcCommand:
    """Replace ``host``'s route to the hosts' subnet by one with congestion control
    ``name`` (the same route otherwise: the kernel's, from the host's address)."""
    subnet = f"{SUBNET}.0/{PREFIX_LEN}"
    route = ("dev", host.iface, "proto", "kernel", "scope", "link", "src", host.ip)
    return TcCommand(host.name, ("ip", "route", "replace", subnet, *route, "congctl", name))


def route_show_command(host: EmuHost) -> TcCommand:
    """List ``host``'s route to the hosts' subnet (to read its ``congctl`` back)."""
    subnet = f"{SUBNET}.0/{PREFIX_LEN}"
    return TcCommand(host.name, ("ip", "route", "show", subnet, "dev", host.iface))


def default_command(host: EmuHost) -> TcCommand:
    """Print the congestion control of ``host``'s connections where no route sets one."""
    return TcCommand(host.name, ("cat", DEFAULT))


def route_congctl(listing: str) -> str | None:
    """The congestion control an ``ip route show`` line sets (``congctl NAME``), else None."""
    match = _CONGCTL.search(listing)
    return None if match is None else match.group(1)
