"""Parity figures: predicted against measured on log axes, times (ms) and energy (J) apart."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import NamedTuple

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from edgetwin.number_text import hover_number
from edgetwin.reports.style import log_ticks, metric_color, metric_label, styled

# unit, metric-name suffix, panel title: a metric's unit is the end of its name
PANELS = (("ms", "_ms", "Latency"), ("J", "_j", "Energy"))


class ParityPoint(NamedTuple):
    """One measured/predicted pair; ``label`` names its configuration on hover."""

    metric: str
    label: str
    measured: float
    predicted: float
    error_pct: float | None


def _add_panel(fig: go.Figure, points: list[ParityPoint], unit: str, col: int) -> None:
    by_metric: dict[str, list[ParityPoint]] = defaultdict(list)
    for point in points:
        by_metric[point.metric].append(point)
    for metric, group in by_metric.items():
        fig.add_scatter(
            x=[p.measured for p in group],
            y=[p.predicted for p in group],
            text=[p.label for p in group],
            customdata=[p.error_pct for p in group],
            name=metric_label(metric),
            legendgroup=metric,
            mode="markers",
            marker={"size": 9, "color": metric_color(metric)},
            hovertemplate=f"%{{text}}<br>measured {hover_number('x')} {unit}, predicted "
            f"{hover_number('y')} "
            f"{unit}<br>error %{{customdata:+.1f}}%<extra>{metric_label(metric)}</extra>",
            row=1,
            col=col,
        )
    values = [v for p in points for v in (p.measured, p.predicted)]
    low, high = min(values) / 1.2, max(values) * 1.2
    fig.add_scatter(
        x=[low, high],
        y=[low, high],
        name="predicted = measured",
        legendgroup="identity",
        showlegend=col == 1,
        mode="lines",
        line={"color": "gray", "dash": "dash"},
        hoverinfo="skip",
        row=1,
        col=col,
    )
    fig.update_xaxes(title=f"Measured ({unit})", **log_ticks(values), row=1, col=col)
    fig.update_yaxes(title=f"Predicted ({unit})", **log_ticks(values), row=1, col=col)


def parity_figure(
    title: str, points: Sequence[ParityPoint], panel_suffix: str = ""
) -> go.Figure | None:
    """One panel per unit that has points (ms, then J), each with the identity line and
    its unit on both axes; points not above 0 are left out (log axes). None when nothing
    is left."""
    positive = [p for p in points if p.measured > 0 and p.predicted > 0]
    panels = [
        (unit, name, group)
        for unit, suffix, name in PANELS
        if (group := [p for p in positive if p.metric.endswith(suffix)])
    ]
    if not panels:
        return None
    titles = [name + panel_suffix for _, name, _ in panels]
    fig = styled(make_subplots(rows=1, cols=len(panels), subplot_titles=titles))
    fig.update_layout(title=title)
    for col, (unit, _, group) in enumerate(panels, start=1):
        _add_panel(fig, group, unit, col)
    return fig
