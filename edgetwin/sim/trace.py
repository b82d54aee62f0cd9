"""Chrome-trace JSON of simulated timelines (opens in Perfetto or chrome://tracing).

One process per run (configuration and repetition), one thread per device;
every non-idle interval is a complete ("X") event, in microseconds.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from edgetwin.models.registry import candidate_label
from edgetwin.number_text import exact_text
from edgetwin.sim.runner import RunOutcome

PHASE_OF_STATE = {
    "compute": "compute",
    "host": "compute",
    "staging": "staging",
    "comm": "comm",
    "load": "load",
}


def chrome_trace(outcomes: Iterable[RunOutcome]) -> dict[str, Any]:
    """The trace document for ``outcomes``."""
    events: list[dict[str, Any]] = []
    for pid, outcome in enumerate(outcomes):
        row = outcome.row
        candidate = candidate_label(row.strategy, row.devices, row.cr, row.segments)
        label = f"{candidate} b={row.batch} {exact_text(row.bandwidth_mbps)} Mbps"
        events.append(
            {
                "ph": "M",
                "name": "process_name",
                "pid": pid,
                "tid": 0,
                "args": {"name": f"{label} rep {row.rep}"},
            }
        )
        threads: dict[str, int] = {}
        for interval in outcome.intervals:
            if interval.state == "idle":
                continue
            if interval.device not in threads:
                threads[interval.device] = len(threads)
                events.append(
                    {
                        "ph": "M",
                        "name": "thread_name",
                        "pid": pid,
                        "tid": threads[interval.device],
                        "args": {"name": interval.device},
                    }
                )
            events.append(
                {
                    "ph": "X",
                    "pid": pid,
                    "tid": threads[interval.device],
                    "name": interval.label or interval.state,
                    "cat": PHASE_OF_STATE.get(interval.state, interval.state),
                    "ts": round(interval.start_ms * 1e3, 3),
                    "dur": round((interval.end_ms - interval.start_ms) * 1e3, 3),
                    "args": {"state": interval.state},
                }
            )
    return {"traceEvents": events, "displayTimeUnit": "ms"}
