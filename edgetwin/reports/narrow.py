"""A figure laid out narrow, a paper's column wide (3.5 in, 336 px): its title wrapped, its
legend under the plot in as few rows as its groups fit, its plot no taller than the width
allows, panels side by side set apart, a heatmap's frames inside their cells."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from textwrap import wrap

import plotly.graph_objects as go

from edgetwin.reports.style import (
    FONT_PX,
    LEGEND_GROUP_GAP_PX,
    LEGEND_LINE_PX,
    LEGEND_PAD_PX,
    MARGIN_B_PX,
    ROW_PX,
    legend_height_px,
    styled,
    title_text,
)

NARROW_PX = 600  # a figure narrower than this (a 3.5 in column) has its legend under its plot
TITLE_CHAR_PX = 8.5  # the width of a title's character, on average (16 px Arial)
DETAIL_CHAR_PX = 6.5  # of a title's detail line's (12 px)
# a narrow figure's margins: the left one holds a y axis's labels (up to five digits) and
# title, so that the plot's width, which its legend wraps at, is known; longer ones grow it
NARROW_MARGIN_PX = {"l": 80, "r": 10}
NARROW_PLOT_RATIO = 0.8  # a narrow figure's plot is at most this many times its width tall
NARROW_COLORBAR = {"thickness": 12, "title_side": "right"}  # a narrow heatmap's colour bar
NARROW_COLORBAR_PX = 75  # its width: the bar, its numbers and its title turned on its side
NARROW_PAD_PX = 10  # between a narrow figure's left edge and its title and legend
LEGEND_SYMBOL_PX = 40  # an entry's symbol and the gaps around it (plotly.js: 30 + 2 x 5)
LEGEND_TITLE_PX = 10  # what a group title adds to its text's width (plotly.js)
LEGEND_ITEM_GAP_PX = 5  # between groups side by side (plotly.js's itemGap)
# Arial's advance widths (Helvetica's, and Liberation Sans', the same), thousandths of the
# font size: a narrow legend's layout is worked out from its text's width
_ADVANCE = {
    **dict.fromkeys("'", 191),
    **dict.fromkeys("ijl", 222),
    **dict.fromkeys("|", 260),
    **dict.fromkeys(" !,./:;I[\\]ft", 278),
    **dict.fromkeys("()-`r", 333),
    **dict.fromkeys("{}", 334),
    **dict.fromkeys('"', 355),
    **dict.fromkeys("*", 389),
    **dict.fromkeys("^", 469),
    **dict.fromkeys("Jcksvxyz", 500),
    **dict.fromkeys("#$0123456789?L_abdeghnopqu", 556),
    **dict.fromkeys("+<=>~", 584),
    **dict.fromkeys("FTZ", 611),
    **dict.fromkeys("&ABEKPSVXY", 667),
    **dict.fromkeys("CDHNRUw", 722),
    **dict.fromkeys("GOQ", 778),
    **dict.fromkeys("Mm", 833),
    **dict.fromkeys("%", 889),
    **dict.fromkeys("W", 944),
    **dict.fromkeys("@", 1015),
}
_WIDEST_ADVANCE = 1015  # a character not in the table (≤, µ) is taken as wide as the widest
_DETAIL = re.compile(r"<br><span style='font-size:12px'>(.*)</span>$", re.S)  # title_text's


def at_width(fig: go.Figure, width_px: float) -> go.Figure:
    """A styled copy of ``fig`` laid out ``width_px`` wide. Narrower than ``NARROW_PX`` (a
    paper's 3.5 in column) its title is wrapped to the width and its legend goes under the
    plot (beside it, it took most of the width), its groups side by side where they fit
    and without the group titles their entries repeat (``voltage`` over ``voltage x2``),
    the figure growing by its height; its plot is at most ``NARROW_PLOT_RATIO`` of the
    width tall (at 1000 px wide it was 2.5 times as wide as tall), less where its rows need
    more (a heatmap's, a bar per configuration)."""
    fig = styled(go.Figure(fig))
    if width_px >= NARROW_PX:
        return fig
    bottom = fig.layout.margin.b
    bottom_px = MARGIN_B_PX if bottom is None else bottom
    plot_px = fig.layout.height - fig.layout.margin.t - bottom_px
    plot_px = min(plot_px, max(NARROW_PLOT_RATIO * width_px, ROW_PX * _category_rows(fig)))
    title = fig.layout.title.text
    if title:  # from the figure's left edge: a plot's axis labels may push the plot right
        where = {"xref": "container", "x": 0, "pad_l": NARROW_PAD_PX}
        fig.update_layout(title=where, title_text=_wrapped_title(title, width_px))
    fig = styled(fig.update_layout(margin=NARROW_MARGIN_PX))
    _drop_repeated_group_titles(fig)
    room_px = width_px - NARROW_MARGIN_PX["r"] - NARROW_MARGIN_PX["l"]  # the plot's width
    _space_columns(fig, NARROW_MARGIN_PX["l"] / room_px)
    _fit_heatmap_cells(fig, room_px)
    legend_px = narrow_legend_height_px(fig, room_px) if legend_height_px(fig) else 0
    if legend_px:
        # from the figure's left edge, under the plot: plotly.js wraps it at the plot's
        # width and keeps its height free of the plot (a margin reserved below the axis)
        where = {"xref": "container", "x": NARROW_PAD_PX / width_px, "xanchor": "left"}
        where |= {"yref": "container", "y": 0, "yanchor": "bottom", "orientation": "h"}
        fig.update_layout(legend=where | {"traceorder": "grouped", "entrywidth": 0})
        fig.update_layout(margin_b=bottom_px + legend_px)
    height = fig.layout.margin.t + plot_px + bottom_px + legend_px
    return fig.update_layout(height=round(height))


def _space_columns(fig: go.Figure, gap: float) -> None:
    """Subplots side by side (one row of them) ``gap`` apart (a fraction of the plot's
    width): room for each one's y axis labels and title, which ran into the plot on their
    left at make_subplots' spacing; their titles stay centred over them."""
    axes = sorted(fig.select_xaxes(lambda axis: axis.domain), key=lambda axis: axis.domain[0])
    heights = {tuple(axis.domain or ()) for axis in fig.select_yaxes()}
    if len(axes) < 2 or len(heights) > 1:
        return
    each = (1 - gap * (len(axes) - 1)) / len(axes)
    for index, axis in enumerate(axes):
        start = index * (each + gap)
        centre = sum(axis.domain) / 2
        for note in fig.layout.annotations:  # the subplot's title
            if note.xref == "paper" and note.x is not None and abs(note.x - centre) < 1e-9:
                note.x = start + each / 2
        axis.domain = [start, start + each]


def _fit_heatmap_cells(fig: go.Figure, room_px: float) -> None:
    """A narrow heatmap's markers on its cells (a plan's frame around a fleet's least
    bandwidth, 34 px) no larger than a cell (at 3.5 in seven bandwidths leave 26 px: a
    frame covered its neighbours' numbers), and its colour bar thinner, its title on its
    side, so that the cells keep more of the width (plotly.js sizes their text to fit)."""
    for heat in fig.select_traces(selector={"type": "heatmap"}):
        columns = len(heat.x) if heat.x is not None else len((heat.z or [()])[0])
        scale = heat.showscale is not False
        if scale:
            heat.colorbar.update(NARROW_COLORBAR)
        cell_px = (room_px - (NARROW_COLORBAR_PX if scale else 0)) / max(columns, 1)
        on_cells = (heat.xaxis or "x", heat.yaxis or "y")
        for trace in fig.select_traces(selector={"type": "scatter"}):
            size = trace.marker.size
            if (trace.xaxis or "x", trace.yaxis or "y") == on_cells and isinstance(size, int):
                trace.marker.size = min(size, math.floor(cell_px) - 2)


def _category_rows(fig: go.Figure) -> int:
    """The most category rows a trace of ``fig`` draws: a heatmap's, a horizontal bar
    chart's (0 for others)."""
    rows = [
        len(trace.z or ()) if trace.y is None else _distinct(trace.y)
        for trace in fig.data
        if trace.type == "heatmap" or (trace.type == "bar" and trace.orientation == "h")
    ]
    return max(rows, default=0)


def _distinct(values: Sequence[object]) -> int:
    """How many categories ``values`` names, one level or several (a multicategory axis:
    one list per level)."""
    if values and isinstance(values[0], list | tuple):
        return len(set(zip(*values, strict=True)))
    return len(set(values))


def text_px(text: str, size_px: float = FONT_PX) -> float:
    """How wide ``text`` is drawn in Arial at ``size_px`` (no markup)."""
    return size_px * sum(_ADVANCE.get(c, _WIDEST_ADVANCE) for c in text) / 1000


@dataclass
class _LegendGroup:
    """A group of a legend's entries (a trace of no group is one of its own): its title,
    where one is shown, and its entries' names, in plotly.js's order."""

    key: object
    title: str | None = None
    names: list[str] = field(default_factory=list)

    def lines(self) -> int:
        return len(self.names) + (self.title is not None)

    def width_px(self) -> float:
        widths = [text_px(name) + LEGEND_SYMBOL_PX for name in self.names]
        if self.title is not None:
            widths.append(text_px(self.title) + LEGEND_TITLE_PX)
        return max(widths) + LEGEND_ITEM_GAP_PX


def _legend_groups(fig: go.Figure) -> list[_LegendGroup]:
    groups: dict[object, _LegendGroup] = {}
    for index, trace in enumerate(fig.data):
        if trace.showlegend is False or (trace.type == "heatmap" and not trace.showlegend):
            continue
        key = trace.legendgroup or ("", index)
        group = groups.setdefault(key, _LegendGroup(key))
        if group.title is None and trace.legendgrouptitle.text:
            group.title = trace.legendgrouptitle.text
        group.names.append(trace.name or "")
    return list(groups.values())


def narrow_legend_height_px(fig: go.Figure, room_px: float) -> int:
    """The height of ``fig``'s horizontal legend, its groups side by side (each group's
    lines one under the other) and a new row where the next group would pass ``room_px``,
    as plotly.js lays out a grouped horizontal legend."""
    rows_px: list[int] = []
    row_px, used_px = 0, 0.0
    for group in _legend_groups(fig):
        group_px = group.width_px()
        if used_px > 0 and used_px + group_px > room_px:
            rows_px.append(row_px)
            row_px, used_px = 0, 0.0
        row_px = max(row_px, LEGEND_LINE_PX * group.lines())
        used_px += group_px
    rows_px.append(row_px)
    return LEGEND_PAD_PX + sum(rows_px) + LEGEND_GROUP_GAP_PX * (len(rows_px) - 1)


def _drop_repeated_group_titles(fig: go.Figure) -> None:
    """Leave out the title of a legend group whose every entry starts with it (``voltage``
    over ``voltage x2`` and ``voltage x4``): a narrow legend's line saved."""
    for group in _legend_groups(fig):
        title = group.title
        if title is not None and all(name.startswith(title) for name in group.names):
            fig.for_each_trace(
                lambda trace: trace.update(legendgrouptitle_text=None),
                selector=lambda trace, key=group.key: trace.legendgroup == key,
            )


def _wrapped_title(title: str, width_px: float) -> str:
    """A ``title_text`` title wrapped again for a figure ``width_px`` wide."""
    room_px = width_px - 2 * NARROW_PAD_PX
    found = _DETAIL.search(title)
    main = title if found is None else title[: found.start()]
    chars = int(room_px / TITLE_CHAR_PX)
    lines = [line for part in main.split("<br>") for line in wrap(part, chars)]
    detail = None if found is None else found.group(1).replace("<br>", " ")
    return title_text("<br>".join(lines), detail, int(room_px / DETAIL_CHAR_PX))
