"""CROWDio Android worker logs (format: ``edgetwin.worker_log``): rows to ``WorkerEvent``s."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import cast

from edgetwin.csv_rows import Row, read_rows
from edgetwin.number_text import exact_text
from edgetwin.worker_log import COLUMNS, EVENTS, TASK_EVENTS, Event


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


def read_worker_log(path: str | Path) -> list[WorkerEvent]:
    """Rows of a CROWDio worker log."""
    path = Path(path)
    return [_event(row) for row in read_rows(path, COLUMNS)]


def _event(row: Row) -> WorkerEvent:
    event = cast(Event, row.choice("event", EVENTS))
    start_s = row.number("start_s", minimum=0.0)
    end_s = row.number("end_s", minimum=0.0)
    if end_s < start_s:
        raise row.error(
            "end_s",
            f"negative duration: ends at {exact_text(end_s)} s, before {exact_text(start_s)} s",
        )
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
