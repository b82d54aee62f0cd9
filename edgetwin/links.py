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

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from edgetwin.csv_rows import Row, read_rows
from edgetwin.number_text import exact_text, figure_text

TOLERANCE_PCT = 5.0
LINK_CHECK_FILE = "link_check.csv"  # an emulator run's checks of its links


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
        ""
        if flows == 1
        else f", one of {flows} senders at once (share {figure_text(bandwidth_mbps / flows)})"
    )
    return (
        f"link {sender} -> {receiver} set to {exact_text(bandwidth_mbps)} Mbps{share} carried "
        f"{wire_mbps:.1f} Mbps on the wire ({error_pct:+.1f} %, tolerance "
        f"{exact_text(TOLERANCE_PCT)} %): times at {exact_text(bandwidth_mbps)} Mbps are not the "
        "link's alone"
    )


def worst_error_pct(errors_pct: Iterable[float]) -> float | None:
    """The error furthest from zero (None without checks)."""
    return max(errors_pct, key=abs, default=None)


@dataclass(frozen=True)
class CheckedLink:
    """A row of ``link_check.csv`` as read back: one direction at a set rate, one of
    ``flows`` senders at once on it, and what it carried."""

    bandwidth_mbps: float
    sender: str
    receiver: str
    goodput_mbps: float
    wire_mbps: float | None  # None in files written before the wire rate
    error_pct: float | None
    flows: int = 1
    line: int | None = None  # its line in link_check.csv, when read from it

    @property
    def goodput_share(self) -> float:
        """iperf3's TCP goodput over the set rate's share (the rate / ``flows``)."""
        return self.goodput_mbps * self.flows / self.bandwidth_mbps

    def warning(self) -> str | None:
        """The warning when the wire rate is outside the tolerance, else None."""
        if self.wire_mbps is None or self.error_pct is None or within_tolerance(self.error_pct):
            return None
        return link_warning(
            self.bandwidth_mbps, self.sender, self.receiver, self.wire_mbps, self.error_pct,
            self.flows,
        )  # fmt: skip


def read_link_checks(path: Path, text: str | None = None) -> list[CheckedLink]:
    """The rows of a ``link_check.csv`` (``text``: its text, already read; none: a run that
    checked no link writes the header alone); a bad cell is an InputError naming the file,
    its column and the line."""
    optional = ("wire_mbps", "error_pct", "flows")
    rows = read_rows(path, _REQUIRED_COLUMNS, optional, rows_needed=False, text=text)
    return [_checked_link(row) for row in rows]


def link_warnings(checks: Iterable[CheckedLink]) -> list[str]:
    """The warning of every check outside its tolerance, in file order."""
    return [warning for check in checks if (warning := check.warning()) is not None]


_REQUIRED_COLUMNS = ("bandwidth_mbps", "sender", "receiver", "goodput_mbps")


def _checked_link(row: Row) -> CheckedLink:
    error_pct = row.optional_number("error_pct")
    return CheckedLink(
        bandwidth_mbps=row.positive("bandwidth_mbps"),
        sender=row.text("sender"),
        receiver=row.text("receiver"),
        goodput_mbps=row.number("goodput_mbps", minimum=0),  # a link may carry nothing
        wire_mbps=None if error_pct is None else row.number("wire_mbps", minimum=0),
        error_pct=error_pct,
        flows=row.optional_integer("flows", minimum=1) or 1,  # files before the shared medium
        line=row.line,
    )
