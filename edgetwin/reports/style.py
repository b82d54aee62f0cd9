"""The one look of every figure edgetwin draws: template, colours, dashes, ticks, sizes.

Every page (run, plan, evaluations, crowd, emulator) and every static file passes its
figures through ``styled``, so fonts, colours and margins are the same everywhere.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from textwrap import wrap

import plotly.graph_objects as go
import plotly.io as pio

from edgetwin.number_text import exact_text

TEMPLATE = "edgetwin"
HEIGHT_PX = 460
FONT_PX = 13  # the template's text (a legend's entries, tick labels)
WIDTH_PX = 1000  # the width of a static figure; pages let the figure fill the column
ROW_PX = 22  # height per category row of a horizontal bar chart or a heatmap
FONT = "Arial, Helvetica, sans-serif"
# Tableau 10: ten colours that stay apart in print and for the common colour blindness.
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "star", "hexagon")
SWEPT_TICKS = 7  # a log axis with at most this many values is labelled at each
END_TICK_RATIO = 1.3  # a log axis's end is labelled when no 1-2-5 tick is this near
NARROW_END_TICK_RATIO = 1.05  # ... or this near, on an axis with one 1-2-5 tick or none
TITLE_CHARS = 95  # a title's detail line is wrapped at this many characters
TITLE_LINE_PX = 20
TITLE_PAD_PX = 14  # from the figure's top edge to its title's first line
LEGEND_LINE_PX = 21  # a legend entry or group title at the template's font size
LEGEND_GROUP_GAP_PX = 6  # the template's tracegroupgap
LEGEND_PAD_PX = 20
MARGIN_B_PX = 60  # below the plot: the x axis, its labels and title
# a results metric as a figure names it, and its colour in every figure that draws
# metrics apart (the latency breakdown, predicted vs measured): compute is one colour
METRIC_LOOKS = {
    "total_ms": ("total latency", "#b07aa1"),
    "ttft_ms": ("time to first token", "#76b7b2"),
    "tpot_ms": ("time per output token", "#ff9da7"),
    "compute_ms": ("compute", "#4e79a7"),
    "staging_ms": ("staging", "#f28e2b"),
    "load_ms": ("model load", "#9c755f"),
    "comm_ms": ("communication", "#59a14f"),
    "energy_j": ("energy", "#e15759"),
    # a trace fit's held-out points (``edgetwin validate``): the whole ViT on one device, and
    # a staged exchange (staging + communication); past the palette, the colours left
    "vit_full_ms": ("whole model", "#edc948"),
    "exchange_total_ms": ("staged exchange", "#444444"),
}

_template = go.layout.Template(pio.templates["plotly_white"])
_template.layout.update(
    font={"family": FONT, "size": FONT_PX, "color": "#222"},
    title={
        "x": 0.0,
        "xanchor": "left",
        "xref": "paper",
        "y": 1.0,
        "yanchor": "top",
        "yref": "container",
        "pad": {"t": TITLE_PAD_PX},
        "font": {"size": 16},
    },
    colorway=PALETTE,
    legend={"tracegroupgap": LEGEND_GROUP_GAP_PX, "groupclick": "toggleitem"},
    margin={"t": TITLE_LINE_PX * 2 + 30, "l": 70, "r": 30, "b": MARGIN_B_PX},
    hovermode="closest",
)
pio.templates[TEMPLATE] = _template


def styled(fig: go.Figure) -> go.Figure:
    """``fig`` in the edgetwin template, at the default height unless it set its own, with
    room above the plot for every line of its title and beside it for its whole legend (a
    static file cuts off what does not fit)."""
    fig.update_layout(template=TEMPLATE)
    lines = (fig.layout.title.text or "").count("<br>") + 1
    top = TITLE_LINE_PX * max(lines, 2) + 30 + (20 if fig.layout.annotations else 0)
    fig.update_layout(margin_t=top)
    if lines > 1:  # plotly.js draws such a title higher: its first line touched the edge
        fig.update_layout(title_pad_t=2 * TITLE_PAD_PX)
    bottom = fig.layout.margin.b
    legend_room = top + (MARGIN_B_PX if bottom is None else bottom)
    legend_room += legend_height_px(fig)
    fig.update_layout(height=max(fig.layout.height or HEIGHT_PX, legend_room))
    return fig


def legend_height_px(fig: go.Figure) -> int:
    """The height of ``fig``'s vertical legend: a line per entry and per group title, a gap
    between groups; 0 without one (or with a horizontal one, below the plot)."""
    if fig.layout.showlegend is False or fig.layout.legend.orientation == "h":
        return 0
    shown = [t for t in fig.data if t.showlegend is not False and t.type != "heatmap"]
    if len(shown) < 2 and not any(t.showlegend for t in shown):
        return 0  # plotly draws no legend for one trace
    groups = {t.legendgroup for t in shown}
    titles = {t.legendgroup for t in shown if t.legendgrouptitle.text}
    lines = len(shown) + len(titles)
    return LEGEND_PAD_PX + LEGEND_LINE_PX * lines + LEGEND_GROUP_GAP_PX * (len(groups) - 1)


def title_text(main: str, detail: str | None = None, chars: int = TITLE_CHARS) -> str:
    """A title that fits: ``main`` on top, ``detail`` smaller below it, wrapped at
    ``chars`` characters."""
    if not detail:
        return main
    lines = "<br>".join(wrap(detail, chars))
    return f"{main}<br><span style='font-size:12px'>{lines}</span>"


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def shade(hex_color: str, amount: float) -> str:
    """``hex_color`` mixed with white (``amount`` < 0) or black (> 0) by ``|amount|``."""
    toward = 0 if amount > 0 else 255
    channels = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    mixed = (round(c + (toward - c) * abs(amount)) for c in channels)
    return "#" + "".join(f"{c:02x}" for c in mixed)


def discrete_colorscale(colors: Sequence[str]) -> list[list[float | str]]:
    """A heatmap colour scale whose cell of code ``i`` (zmin -0.5, zmax len - 0.5) is
    exactly ``colors[i]``: one band per colour, no blend between them."""
    steps = max(1, len(colors))
    scale: list[list[float | str]] = []
    for i, each in enumerate(colors):
        scale += [[i / steps, each], [(i + 1) / steps, each]]
    return scale or [[0.0, "#ffffff"], [1.0, "#ffffff"]]


def dash(index: int) -> str:
    return DASHES[index % len(DASHES)]


def symbol(index: int) -> str:
    return SYMBOLS[index % len(SYMBOLS)]


def metric_label(metric: str) -> str:
    """``communication`` for ``comm_ms``: a metric's name for a legend (else the column)."""
    return METRIC_LOOKS[metric][0] if metric in METRIC_LOOKS else metric


def metric_color(metric: str) -> str | None:
    """A metric's colour in every figure (None: the template's next one)."""
    return METRIC_LOOKS[metric][1] if metric in METRIC_LOOKS else None


def log_ticks(values: Iterable[float | None], *, swept: bool = False) -> dict[str, object]:
    """A log axis without crowded minor labels: labelled at the values themselves, exactly
    (2048, not 2050), when they are a few swept ones (``swept``: batch sizes), else at
    1-2-3-5, 1-2-5 or decade steps (as it spans one, two or more decades) and at its ends
    where no step is near them."""
    positive = sorted({v for v in values if v is not None and v > 0})
    if not positive:
        return {"type": "log"}
    if swept and len(positive) <= SWEPT_TICKS:
        return {"type": "log", "tickvals": positive, "ticktext": [exact_label(v) for v in positive]}
    low, high = positive[0], positive[-1]
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    last = min(last, sys.float_info.max_10_exp)  # 10.0**309 overflows (a time of 1.7e308)
    decades = math.log10(high / low)
    steps = (1, 2, 3, 5) if decades <= 1 else (1, 2, 5) if decades <= 2 else (1,)
    ticks = [m * 10.0**e for e in range(first, last + 1) for m in steps]
    ticks = [t for t in ticks if low <= t <= high]
    near = END_TICK_RATIO if len(ticks) > 1 else NARROW_END_TICK_RATIO
    for end in (low, high):
        if all(max(end, t) / min(end, t) > near for t in ticks):
            ticks.append(end)
    ticks.sort()
    return {"type": "log", "tickvals": ticks, "ticktext": [tick_label(t) for t in ticks]}


def tick_label(value: float) -> str:
    """``0.51``, ``17.7``, ``4,090``, ``0.0000123``: three significant digits, thousands
    separated, no exponent (``exact_text``)."""
    return exact_text(float(f"{value:.3g}"))


def exact_label(value: float) -> str:
    """A swept value as it was swept: ``2,048``, ``0.5``, ``130,944`` (no rounding)."""
    return exact_text(value)


def rows_height(rows: int, minimum_px: int = HEIGHT_PX) -> int:
    """The height of a figure with ``rows`` category rows: grows with them."""
    return max(minimum_px, 160 + ROW_PX * rows)


def legend_key(
    fig: go.Figure,
    name: str,
    *,
    group: str,
    line: Mapping[str, object] | None = None,
    marker: Mapping[str, object] | None = None,
    row: int | None = None,
    col: int | None = None,
) -> None:
    """A legend entry only (no data): one per colour and one per dash, not one per trace."""
    fig.add_trace(
        go.Scatter(
            x=[None],
            y=[None],
            name=name,
            mode="lines+markers" if marker else "lines",
            line=line or {"color": "#555"},
            marker=marker or {},
            legendgroup=group,
            legendgrouptitle_text=group,
            hoverinfo="skip",
        ),
        row=row,
        col=col,
    )


def reference_line(x: Sequence[float | str], y: float, name: str, hover: str) -> go.Scatter:
    """A dashed black line at ``y`` across ``x`` (a limit: a device's RAM, a target), that
    hovers ``hover`` with its unit (plotly's bare ``(x, y)`` had none). A trace, not
    ``add_hline``: that one's annotation breaks a log axis's range."""
    return go.Scatter(
        x=list(x),
        y=[y] * len(x),
        mode="lines",
        line={"dash": "dash", "color": "black"},
        name=name,
        hovertemplate=f"{hover}<extra></extra>",
    )


def categories(values: Sequence[float]) -> list[str]:
    """Swept values as category labels (a heatmap's cells on those values only)."""
    return [exact_text(v) for v in values]
