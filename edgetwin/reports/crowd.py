"""Figures of crowd runs (CROWDio over phones): latency distribution, per-phone timelines.

The latency figure reads results rows; the timeline figures read the records
``edgetwin run --trace`` writes for a crowd scenario (``timeline.json``:
activities, RAM and battery samples per phone).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

import plotly.graph_objects as go
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from edgetwin.errors import InputError
from edgetwin.models import registry
from edgetwin.number_text import exact_text, hover_number
from edgetwin.reports.style import METRIC_LOOKS, color, styled, title_text
from edgetwin.results import ResultRow
from edgetwin.schema import check_regular_file, validation_error
from edgetwin.sim.crowd.records import ACTIVITY_KINDS, Activity, BatterySample, RamSample

# one per activity kind, in their order (a new kind needs one): a load, an inference and a
# transfer in the colours of load_ms, compute_ms and comm_ms, as the job breakdown has them
ACTIVITY_COLORS = dict(
    zip(
        ACTIVITY_KINDS,
        (*(METRIC_LOOKS[m][1] for m in ("load_ms", "compute_ms", "comm_ms")), "#dddddd", "#7f7f7f"),
        strict=True,
    )
)
Records = Mapping[str, Sequence[Mapping[str, Any]]]


MAX_PHONE_LINES = 10  # more phones than this (the palette): a colour and a key per class


class _Phone(BaseModel):
    """A phone's summary, as far as the figures read it: its class."""

    phone: str
    phone_class: str


class _RunRow(BaseModel):
    """A row of the traced run, as far as the figures read it: which run it was."""

    model_config = ConfigDict(allow_inf_nan=False, frozen=True)

    strategy: str
    scheduler: str | None = None
    bandwidth_mbps: float


class _Timeline(BaseModel):
    """The sections of ``timeline.json`` the figures read (the others are left alone)."""

    model_config = ConfigDict(allow_inf_nan=False, frozen=True)

    activities: tuple[Activity, ...] = ()
    ram: tuple[RamSample, ...] = ()
    battery: tuple[BatterySample, ...] = ()
    phones: tuple[_Phone, ...] = ()
    rows: tuple[_RunRow, ...] = ()

    @field_validator("ram", mode="before")
    @classmethod
    def _older_ram(cls, samples: object) -> object:
        """A file written before ``session_mb`` keyed its samples ``rss_mb``: the same
        session RAM, under the name of a process's RSS."""
        if not isinstance(samples, list):
            return samples
        return [_older_sample(sample) for sample in samples]


_OLD_SESSION_KEY = "rss_mb"  # a RAM sample's session RAM before 2026-12-06


def _older_sample(sample: object) -> object:
    """``sample`` with its ``rss_mb`` as ``session_mb`` (a newer one as it is)."""
    if not isinstance(sample, dict) or _OLD_SESSION_KEY not in sample or "session_mb" in sample:
        return sample
    renamed = {key: value for key, value in sample.items() if key != _OLD_SESSION_KEY}
    return {**renamed, "session_mb": sample[_OLD_SESSION_KEY]}


def read_timeline(path: Path) -> Records:
    """``timeline.json``'s activities, RAM and battery samples, checked: a broken file is an
    InputError naming it and the field (it was a traceback from the figure that met it)."""
    check_regular_file(path, path, None)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(path, None, f"not a timeline: {exc}") from None
    if not isinstance(raw, dict):
        raise InputError(path, None, "the top level must be a mapping of keys to values")
    try:
        timeline = _Timeline.model_validate(raw)
    except ValidationError as exc:
        raise validation_error(exc, path, _Timeline) from None
    for index, activity in enumerate(timeline.activities):
        if activity.kind not in ACTIVITY_KINDS:
            problem = f"{activity.kind!r} is not one of {', '.join(ACTIVITY_KINDS)}"
            raise InputError(path, f"activities.{index}.kind", problem)
    return timeline.model_dump()


def is_crowd(rows: Sequence[ResultRow]) -> bool:
    return bool(rows) and all(_pipeline(row.strategy) is not None for row in rows)


def _pipeline(strategy: str) -> str | None:
    """The dependency mode of a crowd strategy (None: not a crowd strategy)."""
    return registry.strategy(strategy).pipeline if strategy in registry.names() else None


def _layout(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    fig.update_layout(title=title, xaxis={"title": x}, yaxis={"title": y})
    return styled(fig)


def _by_mode(rows: Sequence[ResultRow]) -> tuple[dict[str, list[ResultRow]], str]:
    """The finished jobs per dependency mode and scheduler (and bandwidth, where the rows
    have several), and the name of that grouping for an axis."""
    several_bandwidths = len({row.bandwidth_mbps for row in rows}) > 1
    groups: dict[str, list[ResultRow]] = defaultdict(list)
    for row in rows:
        label = _pipeline(row.strategy)
        if row.ok and label is not None:
            name = f"{label} / {row.scheduler}" if row.scheduler else label
            if several_bandwidths:
                name += f" / {exact_text(row.bandwidth_mbps)} Mbit/s"
            groups[name].append(row)
    x = "Mode / scheduler / bandwidth" if several_bandwidths else "Mode / scheduler"
    return dict(groups), x


def latency_distribution_figure(rows: Sequence[ResultRow]) -> go.Figure | None:
    """Job latency (s) per dependency mode and scheduler (and bandwidth, where the rows have
    several), over repetitions and jobs."""
    by_mode, x = _by_mode(rows)
    groups = {name: [row.total_ms / 1e3 for row in jobs] for name, jobs in by_mode.items()}
    if not groups:
        return None
    fig = go.Figure(
        [
            go.Box(
                y=values,
                name=name,
                boxpoints="all",
                hovertemplate="%{y:.2f} s<extra>" + name + "</extra>",
            )
            for name, values in groups.items()
        ]
    )
    fig.update_layout(showlegend=False)  # the x axis names each box
    return _layout(fig, "Pipeline latency per mode", x, "Job latency (s)")


JOB_PARTS = ("load_ms", "compute_ms", "comm_ms")  # a job's critical input, in its order
WAITING_COLOR = "#bab0ac"


def job_breakdown_figure(rows: Sequence[ResultRow]) -> go.Figure | None:
    """Where a job's time goes, per mode (mean over jobs, s): the model loads, inference and
    transfers along its critical input (the one whose result came last), and the rest of
    its latency, waiting (for a phone, a stage, an input); the parts sum to the mean."""
    by_mode, x = _by_mode(rows)
    if not by_mode:
        return None
    names = list(by_mode)
    fig = go.Figure()
    for part in (*JOB_PARTS, "waiting"):
        means = [fmean(_part_s(row, part) for row in by_mode[name]) for name in names]
        look = ("waiting", WAITING_COLOR) if part == "waiting" else METRIC_LOOKS[part]
        fig.add_bar(
            x=names,
            y=means,
            name=look[0],
            marker_color=look[1],
            hovertemplate="%{x}: %{y:.2f} s<extra>" + look[0] + "</extra>",
        )
    fig.update_layout(barmode="stack", legend={"traceorder": "reversed"})  # as stacked
    title = title_text("Where a job's time goes", "mean per job, along its critical input")
    return _layout(fig, title, x, "Mean time per job (s)")


def _part_s(row: ResultRow, part: str) -> float:
    """A part of a job's latency in s (``waiting``: what the other parts leave of it)."""
    if part == "waiting":
        return max(row.total_ms - sum(getattr(row, p) or 0.0 for p in JOB_PARTS), 0.0) / 1e3
    return float(getattr(row, part) or 0.0) / 1e3


def _traced_run(records: Records) -> str:
    """Which run the timelines are (``--trace`` records the first): ``first run: streaming /
    affinity, 300 Mbit/s`` (a page of several modes drew them as if of every one)."""
    rows = records.get("rows", [])
    if not rows:
        return "first run"
    row = rows[0]
    mode = _pipeline(str(row["strategy"])) or str(row["strategy"])
    scheduler = f" / {row['scheduler']}" if row.get("scheduler") else ""
    return f"first run: {mode}{scheduler}, {exact_text(float(row['bandwidth_mbps']))} Mbit/s"


def gantt_figure(records: Records) -> go.Figure | None:
    """One row per phone: load, infer, transfer, idle and away stretches over time."""
    activities = records.get("activities", [])
    if not activities:
        return None
    fig = go.Figure()
    for kind, kind_color in ACTIVITY_COLORS.items():
        spans = [a for a in activities if a["kind"] == kind]
        if spans:
            fig.add_trace(
                go.Bar(
                    y=[a["phone"] for a in spans],
                    x=[a["end_s"] - a["start_s"] for a in spans],
                    base=[a["start_s"] for a in spans],
                    orientation="h",
                    name=kind,
                    marker_color=kind_color,
                    customdata=[
                        [
                            a["start_s"],
                            a["end_s"],
                            f"{a.get('stage') or ''} {a.get('detail') or ''}",
                        ]
                        for a in spans
                    ],
                    hovertemplate="%{y}: %{customdata[0]:.2f}-%{customdata[1]:.2f} s"
                    "<br>%{customdata[2]}<extra>" + kind + "</extra>",
                )
            )
    fig.update_layout(barmode="overlay")
    title = f"What each phone did ({_traced_run(records)})"
    return _layout(fig, title, "Time (s)", "Phone")


def _classes(records: Records, section: str) -> dict[str, str] | None:
    """Phone -> class where a figure draws by class: past ``MAX_PHONE_LINES`` phones (a
    legend of a hundred entries in ten recycled colours), if the records name the classes."""
    phones = {str(sample["phone"]) for sample in records[section]}
    class_of = {str(p["phone"]): str(p["phone_class"]) for p in records.get("phones", [])}
    return class_of if len(phones) > MAX_PHONE_LINES and phones <= set(class_of) else None


def _run_end_s(records: Records) -> float | None:
    """Where the first run's timeline ends: its activities' last end (idle runs to it)."""
    return max((float(a["end_s"]) for a in records.get("activities", [])), default=None)


def _held_to_end(
    times: list[float], values: list[float], end_s: float | None
) -> tuple[list[float], list[float]]:
    """A step line held at its last value to the run's end: a phone sampled once (or only
    at 0 s) drew nothing, its level or memory lasting to the end of the run."""
    if end_s is None or not times or end_s <= times[-1]:
        return times, values
    return [*times, end_s], [*values, values[-1]]


def _per_phone_lines(
    records: Records, section: str, value: str, unit: str, class_of: dict[str, str] | None
) -> go.Figure:
    """A line per phone, held to the run's end; with ``class_of``, the phones of a class in
    its colour, one key."""
    by_phone: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for sample in records[section]:
        by_phone[str(sample["phone"])].append(sample)
    classes = list(dict.fromkeys(class_of[phone] for phone in by_phone)) if class_of else []
    end_s = _run_end_s(records)
    fig = go.Figure()
    keyed: set[str] = set()
    for phone, points in by_phone.items():
        line: dict[str, Any] = {"shape": "hv"}
        look: dict[str, Any] = {"name": phone}
        if class_of:
            group = class_of[phone]
            line |= {"color": color(classes.index(group)), "width": 1}
            look = {"name": group, "legendgroup": group, "showlegend": group not in keyed}
            keyed.add(group)
        x, y = _held_to_end([s["t_s"] for s in points], [s[value] for s in points], end_s)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines",
                line=line,
                hovertemplate=f"%{{x:.2f}} s: {hover_number('y')} {unit}<extra>{phone}</extra>",
                **look,
            )
        )
    return fig


def _class_means(
    records: Records, section: str, value: str, unit: str, class_of: dict[str, str]
) -> go.Figure:
    """A line per class: the mean of its phones' latest samples after each sample (a
    hundred phones' memory, each 0 to 43 MB and back per task, drew a solid comb), held to
    the run's end."""
    latest: dict[str, float] = {}
    total: dict[str, float] = defaultdict(float)
    seen: dict[str, int] = defaultdict(int)
    lines: dict[str, tuple[list[float], list[float]]] = {}
    for sample in sorted(records[section], key=lambda s: s["t_s"]):  # stable: in order
        phone = str(sample["phone"])
        group = class_of[phone]
        if phone not in latest:
            seen[group] += 1
        total[group] += sample[value] - latest.get(phone, 0.0)
        latest[phone] = sample[value]
        times, means = lines.setdefault(group, ([], []))
        times.append(sample["t_s"])
        means.append(total[group] / seen[group])
    end_s = _run_end_s(records)
    lines = {group: _held_to_end(*line, end_s) for group, line in lines.items()}
    return go.Figure(
        [
            go.Scatter(
                x=times,
                y=means,
                name=f"{group} ({seen[group]} phones)",
                mode="lines",
                line={"shape": "hv", "color": color(at)},
                hovertemplate=f"%{{x:.2f}} s: mean {hover_number('y')} {unit}"
                f"<extra>{group}</extra>",
            )
            for at, (group, (times, means)) in enumerate(lines.items())
        ]
    )


def ram_figure(records: Records) -> go.Figure | None:
    if not records.get("ram"):
        return None
    class_of = _classes(records, "ram")
    title = f"Session memory per phone ({_traced_run(records)})"
    if class_of is None:
        fig = _per_phone_lines(records, "ram", "session_mb", "MB", None)
    else:
        fig = _class_means(records, "ram", "session_mb", "MB", class_of)
        title = f"Session memory, mean over each class's phones ({_traced_run(records)})"
    fig.update_yaxes(rangemode="tozero")
    return _layout(fig, title, "Time (s)", "Session memory (MB)")


def battery_figure(records: Records) -> go.Figure | None:
    if not records.get("battery"):
        return None
    fig = _per_phone_lines(records, "battery", "level_pct", "%", _classes(records, "battery"))
    fig.update_yaxes(range=[0, 100])  # a level is 0-100 % (autorange padded below 0)
    title = f"Battery per phone ({_traced_run(records)})"
    return _layout(fig, title, "Time (s)", "Battery (%)")


def crowd_figures(rows: Sequence[ResultRow], records: Records | None) -> list[go.Figure]:
    """Every crowd figure the data allows."""
    candidates = [latency_distribution_figure(rows), job_breakdown_figure(rows)]
    if records is not None:
        candidates += [gantt_figure(records), ram_figure(records), battery_figure(records)]
    return [fig for fig in candidates if fig is not None]
