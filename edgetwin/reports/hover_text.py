"""A page's hovers written as the text beside them: each measured number that a hover asks
d3-format for (``hover_number``'s ``%{y:,.4~r}``) is put in as ``figure_text`` writes it.
d3's ``~r`` keeps four significant digits however large the number (13,220 ms), where the
answers and tables write a figure over 1,000 whole (13,215 ms); no one d3 format does
both."""

from __future__ import annotations

import re
from typing import Any

import plotly.graph_objects as go

from edgetwin.number_text import HOVER_FIGURE, figure_text

# a field a hovertemplate writes in HOVER_FIGURE: x, y, z, customdata or customdata[k]
_MEASURED = re.compile(r"%\{(x|y|z|customdata)(?:\[(\d+)\])?:" + re.escape(HOVER_FIGURE) + r"\}")


def hovers_as_text(fig: go.Figure) -> go.Figure:
    """``fig`` with every trace's measured hover numbers put in as text: a trace of points
    gets a hovertemplate per point; a heatmap (its measured number in ``customdata``, a
    cell's) gets its cells' ``customdata`` as text."""
    for trace in fig.data:
        template = trace.hovertemplate
        if not isinstance(template, str) or not _MEASURED.search(template):
            continue
        if trace.type == "heatmap":  # one template for every cell: its customdata as text
            trace.customdata = [[_text(value) for value in row] for row in trace.customdata]
            trace.hovertemplate = template.replace(
                f"%{{customdata:{HOVER_FIGURE}}}", "%{customdata}"
            )
            continue
        points = len(trace.x if trace.x is not None else trace.y)
        trace.hovertemplate = [_point_template(trace, template, i) for i in range(points)]
    return fig


def _point_template(trace: Any, template: str, index: int) -> str:
    """``template`` with point ``index``'s measured numbers put in."""

    def text(match: re.Match[str]) -> str:
        field, column = match.group(1, 2)
        value = trace[field][index]
        return _text(value if column is None else value[int(column)])

    return _MEASURED.sub(text, template)


def _text(value: Any) -> str:
    """A measured number as ``figure_text`` writes it; a gap (None) as nothing."""
    return "" if value is None else figure_text(float(value))
