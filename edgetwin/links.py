"""What a link check may show: its tolerance, its warning, and reading ``link_check.csv``.

An emulated link is shaped by htb at the set rate; iperf3 measures the TCP goodput
over it, and the wire rate adds the TCP/IP and Ethernet headers back (a full frame
carries 1448 payload bytes in 1514). On an idle machine every link's wire rate is
within 1.3 % of its set rate (docs/emulator.md). What is left below the set rate is
htb's token bucket: tc sizes it to one packet (``burst 1600b``), so whenever the
kernel dequeues later than one packet's time (a busy or preempted machine) the
tokens past one packet are lost and the link carries less. Past ``TOLERANCE_PCT``
the link did not carry its rate, and the emulator's times at that rate are slower
than the link alone makes them: the run says so (console, report, ``results.csv``'s
``link_error_pct``).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from pathlib import Path

TOLERANCE_PCT = 5.0


def within_tolerance(error_pct: float) -> bool:
    """Whether a link's wire rate error against its set rate is small enough to trust."""
    return abs(error_pct) <= TOLERANCE_PCT


def link_warning(
    bandwidth_mbps: float,
    sender: str,
    receiver: str,
    wire_mbps: float,
    error_pct: float,
    flows: int = 1,
) -> str:
    """The warning for one direction outside the tolerance (one of ``flows`` senders at once
    on a shared medium: against its share)."""
    share = (
        "" if flows == 1 else f", one of {flows} senders at once (share {bandwidth_mbps / flows:g})"
    )
    return (
        f"link {sender} -> {receiver} set to {bandwidth_mbps:g} Mbps{share} carried "
        f"{wire_mbps:.1f} Mbps on the wire ({error_pct:+.1f} %, tolerance "
        f"{TOLERANCE_PCT:g} %): times at {bandwidth_mbps:g} Mbps are not the link's alone"
    )


def worst_error_pct(errors_pct: Iterable[float]) -> float | None:
    """The error furthest from zero (None without checks)."""
    return max(errors_pct, key=abs, default=None)


def read_link_warnings(path: Path) -> list[str]:
    """Warnings for the rows of a ``link_check.csv`` outside the tolerance ([] without one)."""
    if not path.is_file():
        return []
    with path.open(newline="") as handle:
        rows: list[Mapping[str, str]] = list(csv.DictReader(handle))
    return [
        link_warning(
            float(row["bandwidth_mbps"]),
            row["sender"],
            row["receiver"],
            float(row["wire_mbps"]),
            float(row["error_pct"]),
            int(row.get("flows") or 1),  # files before the shared medium have no flows
        )
        for row in rows
        if not within_tolerance(float(row["error_pct"]))
    ]
