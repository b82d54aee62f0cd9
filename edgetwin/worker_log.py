"""The CROWDio worker log format: one CSV row per task event, written by each worker.

A phone worker (``edgetwin.emu.crowdio.telemetry``) writes it and the calibration
reader (``edgetwin.calibration.readers.android``) reads it, so both take the
columns and event kinds from here.
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

from typing import Literal

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
