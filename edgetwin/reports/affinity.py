"""The affinity evaluation: affinity.json and affinity.html."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from edgetwin.atomic import write_text_atomic
from edgetwin.evaluate.affinity import AffinityEvaluation
from edgetwin.evaluate.affinity_results import InstanceResult, SchedulerResult
from edgetwin.evaluate.optimum import Schedule
from edgetwin.number_text import figure_text, hover_number
from edgetwin.reports.html import figures_html, page, warnings_html
from edgetwin.reports.style import color, styled, title_text
from edgetwin.run_warnings import write_warnings_file

AFFINITY_PAGE = "affinity.html"


def write_affinity_report(out_dir: Path, evaluation: AffinityEvaluation) -> list[Path]:
    """Write affinity.json, affinity.html and, where the evaluation warned, warnings.json
    into ``out_dir``."""
    paths = [out_dir / "affinity.json", out_dir / AFFINITY_PAGE]
    write_warnings_file(out_dir, evaluation.warnings)
    write_text_atomic(paths[0], json.dumps(evaluation.to_json(), indent=1, allow_nan=False) + "\n")
    write_text_atomic(paths[1], render_affinity(evaluation))
    return paths


def _label(r: InstanceResult) -> str:
    return f"{r.name} ({r.strategy.removeprefix('crowdio_')})"


def affinity_figures(evaluation: AffinityEvaluation) -> list[go.Figure]:
    """Every figure of the schedulers' page (one)."""
    return [_figure(evaluation)]


def render_affinity(evaluation: AffinityEvaluation) -> str:
    """Its warnings on top, then makespan and cold loads per scheduler, the optimum marked,
    per instance; a table."""
    figures = figures_html(affinity_figures(evaluation))
    body = warnings_html(evaluation.warnings) + _table_html(evaluation) + figures
    return page("edgetwin schedulers vs the offline optimum", body)


@dataclass(frozen=True)
class Panel:
    """A subplot: its title, its y axis's title and hover (with the unit), a scheduler's
    value and the optimum's."""

    title: str
    axis: str
    hover: str
    of_scheduler: Callable[[SchedulerResult], float]
    of_optimum: Callable[[Schedule], float]


INSTANCE_AXIS = "Instance (dependency mode)"


def _panels(emu: bool) -> list[Panel]:
    """One panel per value, in page order."""
    panels = [
        Panel(
            "Makespan (s)",
            "Makespan (s)",
            "%{x}: %{y:.2f} s",
            lambda s: s.makespan_s,
            lambda o: o.makespan_ms / 1e3,
        ),
        Panel(
            "Cold loads",
            "Cold loads",
            f"%{{x}}: {hover_number('y')} cold loads",
            lambda s: s.cold_loads,
            lambda o: o.cold_loads,
        ),
    ]
    if emu:
        panels.insert(
            1,
            Panel(
                "Its plans under the measured costs (s)",
                "Makespan under the measured costs (s)",
                "%{x}: %{y:.2f} s",
                lambda s: s.replay.pooled_s if s.replay else float("nan"),
                lambda o: o.makespan_ms / 1e3,
            ),
        )
    return panels


def _figure(evaluation: AffinityEvaluation) -> go.Figure:
    panels = _panels(evaluation.settings.mode == "emu")
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[p.title for p in panels])
    x = [_label(r) for r in evaluation.instances]
    for col, panel in enumerate(panels, start=1):
        for index, name in enumerate(evaluation.settings.schedulers):
            values = [panel.of_scheduler(r.schedulers[name]) for r in evaluation.instances]
            bar = go.Bar(
                x=x,
                y=values,
                name=name,
                marker_color=color(index),  # one colour per scheduler in every panel
                legendgroup=name,
                showlegend=col == 1,
                hovertemplate=f"{panel.hover}<extra>{name}</extra>",
            )
            fig.add_trace(bar, row=1, col=col)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[panel.of_optimum(r.optimum.schedule) for r in evaluation.instances],
                mode="markers",
                marker={"symbol": "diamond", "size": 12, "color": "black"},
                name="optimum",
                legendgroup="optimum",
                showlegend=col == 1,
                hovertemplate=f"{panel.hover}<extra>optimum</extra>",
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(title=INSTANCE_AXIS, row=1, col=col)
        fig.update_yaxes(title=panel.axis, rangemode="tozero", row=1, col=col)
    where = "the emulator" if evaluation.settings.mode == "emu" else "the twin"
    fig.update_layout(
        title=title_text(
            f"Schedulers in {where} and the offline optimum",
            "bars: mean of the runs; diamonds: the optimum",
        ),
        barmode="group",
    )
    return styled(fig)


def _table_html(evaluation: AffinityEvaluation) -> str:
    emu = evaluation.settings.mode == "emu"
    rows = []
    for r in evaluation.instances:
        best = r.optimum.schedule
        proved = "" if r.optimum.proved else " (not proved)"
        measured = ""
        if r.placements_measured is not None:
            measured = " ({} of {} placements measured)".format(*r.placements_measured)
        rows.append(
            f"<tr><td>{escape(_label(r))}</td>"
            f"<td>optimum{proved}{measured}</td>"
            f"<td>{best.makespan_ms / 1e3:.4f}</td><td>{best.cold_loads}</td>"
            f"<td>{best.evictions}</td><td>0</td><td></td>" + ("<td></td>" if emu else "") + "</tr>"
        )
        for name, s in r.schedulers.items():
            model = "" if s.replay is None else f"<td>{s.replay.pooled_s:.4f}</td>"
            rows.append(
                f"<tr><td>{escape(_label(r))}</td><td>{escape(name)}</td>"
                f"<td>{s.makespan_s:.4f}</td><td>{figure_text(s.cold_loads)}</td><td>{figure_text(s.evictions)}</td>"
                f"<td>{s.regret_pct:.1f}</td><td>{s.regret_dispatch_pct:.1f}</td>{model}</tr>"
            )
    costs = (
        "The optimum's costs were measured in the emulator's runs of each instance; the last "
        "column is the scheduler's own plans timed with those costs (loads at dispatch). "
        if emu
        else ""
    )
    model_header = "<th>Its plans in the model (s)</th>" if emu else ""
    return (
        "<p>Regret = (mean makespan - optimum) / optimum. The optimum may prefetch a "
        "phone's next stage; the dispatch regret is against the optimum that loads a stage "
        f"only when its task is dispatched. {costs}See docs/affinity.md.</p>"
        "<table><tr><th>Instance</th><th>Scheduler</th><th>Makespan (s)</th>"
        "<th>Cold loads</th><th>Evictions</th><th>Regret (%)</th>"
        f"<th>Regret vs dispatch optimum (%)</th>{model_header}</tr>{''.join(rows)}</table>"
    )
