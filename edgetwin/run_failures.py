"""Why a run failed: the twin's failure statuses, each a reason and where, and the summary
of a table's failed rows by their commonest reasons."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from edgetwin.number_text import exact_text
from edgetwin.results import ResultRow

# the twin's reasons a run fails, each status one of them and where: "out of memory on
# jetson-0", "device lost: jetson-1: battery empty", "incomplete: 0 of 4 inputs done; <why>"
OUT_OF_MEMORY = "out of memory"
DEVICE_LOST = "device lost"
INCOMPLETE = "incomplete"
SHOWN_REASONS = 3  # the commonest reasons a failure summary names before "..."


def failure_reason(status: str) -> str:
    """What a failed status is counted under, without where: ``out of memory``, ``device
    lost (battery empty)``, a crowd job's why without its counts (``no phone connected``);
    a status of another shape (a measured table's) as it is."""
    if status.startswith(OUT_OF_MEMORY):
        return OUT_OF_MEMORY
    if status.startswith(f"{DEVICE_LOST}: "):
        return f"{DEVICE_LOST} ({status.rsplit(': ', 1)[-1]})"
    if status.startswith(f"{INCOMPLETE}: "):
        return status.split("; ", 1)[-1].split(" (", 1)[0]
    return status


def failed_summary(rows: Iterable[ResultRow]) -> str:
    """``0 failed``, ``3 failed: out of memory 2, device lost (battery empty) 1``: the rows
    that failed and their commonest reasons (``failure_reason``), then "..." for more."""
    reasons = Counter(failure_reason(row.status) for row in rows if not row.ok)
    if not reasons:
        return "0 failed"
    shown = reasons.most_common(SHOWN_REASONS)
    common = ", ".join(f"{why} {exact_text(count)}" for why, count in shown)
    more = ", ..." if len(reasons) > SHOWN_REASONS else ""
    return f"{exact_text(reasons.total())} failed: {common}{more}"
