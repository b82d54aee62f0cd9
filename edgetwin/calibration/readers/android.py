"""CROWDio Android worker logs: one CSV row per task event, written by each worker.

Columns (all in the header; cells marked optional may be empty):

=============  ==============================================================
worker_id      the worker (phone) that logged the row
task_id        task record id; optional for load_cold, load_warm and unload
job_id         the pipeline job
input_index    0-based input of the job; optional like task_id
stage          the model stage, e.g. ``cell_a``
event          ``load_cold`` (download + session init), ``load_warm`` (from the
               phone's storage), ``infer``, ``transfer`` (activation sent), ``unload``
start_s        start on the worker's clock (s, >= 0, e.g. elapsedRealtime)
end_s          end on the same clock (s, >= start_s)
rss_mb         optional: process resident set size at end_s (MB)
battery_pct    optional: battery level at end_s (0-100 %)
battery_mah    optional: remaining charge at end_s (mAh, the charge counter)
bytes          optional: bytes moved (model blob for a cold load, compressed
               activation for a transfer)
=============  ==============================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from edgetwin.calibration.readers._csv import Row, read_rows

COLUMNS = (
    "worker_id",
    "task_id",
    "job_id",
    "input_index",
    "stage",
    "event",
    "start_s",
    "end_s",
    "rss_mb",
    "battery_pct",
    "battery_mah",
    "bytes",
)
Event = Literal["load_cold", "load_warm", "infer", "transfer", "unload"]
EVENTS: tuple[Event, ...] = ("load_cold", "load_warm", "infer", "transfer", "unload")
TASK_EVENTS = ("infer", "transfer")


@dataclass(frozen=True)
class WorkerEvent:
    """One logged event of a worker."""

    worker_id: str
    task_id: str | None
    job_id: str
    input_index: int | None
    stage: str
    event: Event
    start_s: float
    end_s: float
    rss_mb: float | None
    battery_pct: float | None
    battery_mah: float | None
    size_bytes: int | None

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


def read_worker_log(path: Path) -> list[WorkerEvent]:
    """Rows of a CROWDio worker log."""
    return [_event(row) for row in read_rows(path, COLUMNS)]


def _event(row: Row) -> WorkerEvent:
    event = cast(Event, row.choice("event", EVENTS))
    start_s = row.number("start_s", minimum=0.0)
    end_s = row.number("end_s", minimum=0.0)
    if end_s < start_s:
        raise row.error("end_s", f"negative duration: ends at {end_s:g} s, before {start_s:g} s")
    task_event = event in TASK_EVENTS
    return WorkerEvent(
        worker_id=row.text("worker_id"),
        task_id=row.text("task_id") if task_event else row.optional_text("task_id"),
        job_id=row.text("job_id"),
        input_index=(
            row.integer("input_index", minimum=0)
            if task_event
            else row.optional_integer("input_index", minimum=0)
        ),
        stage=row.text("stage"),
        event=event,
        start_s=start_s,
        end_s=end_s,
        rss_mb=row.optional_number("rss_mb", minimum=0.0),
        battery_pct=row.optional_number("battery_pct", 0.0, 100.0),
        battery_mah=row.optional_number("battery_mah", minimum=0.0),
        size_bytes=row.optional_integer("bytes", minimum=0),
    )
