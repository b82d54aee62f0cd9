"""Report figures: pure functions from rep means (or a comparison) to plotly figures.

Each returns None when the run lacks the data for that figure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from edgetwin.comparison import Comparison, key_label
from edgetwin.models import registry
from edgetwin.number_text import exact_text, hover_number
from edgetwin.reports.parity import ParityPoint, parity_figure
from edgetwin.reports.rows import Config, Point, config_labels, most_common_bandwidth
from edgetwin.reports.style import (
    color,
    dash,
    legend_key,
    log_ticks,
    metric_color,
    metric_label,
    rows_height,
    shade,
    styled,
    symbol,
    title_text,
)
from edgetwin.results import LATENCY_PARTS

BATCH_AXIS = "Batch size (samples)"


@dataclass(frozen=True)
class Look:
    """How one configuration is drawn: its strategy's colour, its own dash and marker."""

    color: str
    dash: str
    symbol: str

    def line(self) -> dict[str, str]:
        return {"color": self.color, "dash": self.dash}


def strategy_color(strategy: str) -> str:
    """A strategy's colour on every figure of every page: its place in the registry (by
    its place in a figure, a figure without single gave voltage single's blue)."""
    known = registry.names()
    return color(known.index(strategy) if strategy in known else len(known))


# several candidates of one strategy: shades from SHADE_SPAN / 2 lighter to as much
# darker, at most SHADE_STEP apart (two: 0.3 lighter and 0.3 darker)
SHADE_SPAN = 0.9
SHADE_STEP = 0.6


def candidate_colors(strategy_of: Mapping[str, str]) -> dict[str, str]:
    """Each candidate (label -> strategy, in ``CandidateKey.order``) in its strategy's
    colour, so that a heatmap keeps the colours of the page's lines; several of one
    strategy (prism cr 9.9 x2 and x4) in shades of it, lighter to darker in that order."""
    by_strategy: dict[str, list[str]] = defaultdict(list)
    for label, strategy in strategy_of.items():
        by_strategy[strategy].append(label)
    colors = {}
    for strategy, labels in by_strategy.items():
        spacing = min(SHADE_STEP, SHADE_SPAN / max(len(labels) - 1, 1))
        middle = (len(labels) - 1) / 2
        for k, label in enumerate(labels):
            colors[label] = shade(strategy_color(strategy), (k - middle) * spacing)
    return {label: colors[label] for label in strategy_of}


def looks(labels: dict[Config, str]) -> dict[Config, Look]:
    """Strategy by colour; within a strategy, CR or device count by dash and marker."""
    seen: dict[str, int] = defaultdict(int)
    result = {}
    for config in labels:
        within = seen[config.strategy]
        seen[config.strategy] += 1
        result[config] = Look(strategy_color(config.strategy), dash(within), symbol(within))
    return result


def _figure(title: str, fig: go.Figure | None = None) -> go.Figure:
    return styled(go.Figure() if fig is None else fig).update_layout(title=title)


def _error_bars(values: Sequence[float | None]) -> dict[str, object] | None:
    """Error bars of one standard deviation over the reps, where there are several."""
    if all(v is None for v in values):
        return None
    return {"type": "data", "array": [v or 0.0 for v in values], "visible": True, "width": 3}


def _band_bars(
    values: Sequence[float | None], bands: Sequence[tuple[float, float] | None]
) -> dict[str, object] | None:
    """Asymmetric error bars from each point's prediction interval (the ``_lo``/``_hi``
    columns); None unless every point has one."""
    pairs = [(v, b) for v, b in zip(values, bands, strict=True) if v is not None and b]
    if not pairs or len(pairs) < len(values):
        return None
    above = [b[1] - v for v, b in pairs]
    below = [v - b[0] for v, b in pairs]
    return {"type": "data", "symmetric": False, "array": above, "arrayminus": below, "width": 3}


INTERVAL_NOTE = "error bars: the prediction interval of each point"
SPREAD_NOTE = "error bars: one standard deviation over the repetitions"


def _bars_note(bands: Sequence[object], spreads: Sequence[float | None] = ()) -> str | None:
    """What a figure's error bars are (a reader cannot tell an interval from a spread):
    prediction intervals where the rows have them, else the repetitions' spread; None
    without bars."""
    if any(bands):
        return INTERVAL_NOTE
    return SPREAD_NOTE if any(v is not None for v in spreads) else None


def _at_common_bandwidth(points: Sequence[Point]) -> tuple[float, list[Point]] | None:
    bandwidth_mbps = most_common_bandwidth(points)
    if bandwidth_mbps is None:
        return None
    return bandwidth_mbps, [p for p in points if p.bandwidth_mbps == bandwidth_mbps]


def latency_breakdown_figure(points: Sequence[Point]) -> go.Figure | None:
    """Stacked compute / staging / comm ms per batch and configuration."""
    common = _at_common_bandwidth(points)
    if common is None:
        return None
    bandwidth_mbps, chosen = common
    labels = config_labels(p.config for p in points)
    y = [[labels[p.config] for p in chosen], [f"batch {p.batch}" for p in chosen]]
    fig = _figure(f"Latency breakdown per batch at {exact_text(bandwidth_mbps)} Mbit/s")
    for attr in LATENCY_PARTS:  # stacked
        name = metric_label(attr)
        fig.add_bar(
            y=y,
            x=[getattr(p, attr) for p in chosen],
            orientation="h",
            name=name,
            marker_color=metric_color(attr),
            hovertemplate=f"%{{y}}<br>{name}: %{{x:.1f}} ms<extra></extra>",
        )
    # the legend in the order of the stack, left to right (plotly reverses a stack's)
    fig.update_layout(barmode="stack", height=rows_height(len(chosen)), legend_traceorder="normal")
    fig.update_yaxes(title="Configuration / batch size (samples)", autorange="reversed")
    fig.update_xaxes(title="Latency per batch (ms)")
    return fig


def _by_config(points: Sequence[Point]) -> dict[Config, list[Point]]:
    grouped: dict[Config, list[Point]] = defaultdict(list)
    for point in points:
        grouped[point.config].append(point)
    return grouped


def _per_sample_bars(line: Sequence[Point]) -> dict[str, object] | None:
    """A line's prediction intervals per sample where the rows have them, else the reps'
    standard deviation."""
    bands = [_per_sample(p.total_band_ms, p) for p in line]
    return _band_bars([p.per_sample_ms for p in line], bands) or _error_bars(
        [p.per_sample_sd_ms for p in line]
    )


def _per_sample(band: tuple[float, float] | None, point: Point) -> tuple[float, float] | None:
    """A band of the whole batch divided by its samples."""
    return None if band is None else (band[0] / point.batch, band[1] / point.batch)


def per_sample_figure(points: Sequence[Point]) -> go.Figure | None:
    """Per-sample latency (ms) against batch size, one line per configuration."""
    common = _at_common_bandwidth(points)
    if common is None:
        return None
    bandwidth_mbps, chosen = common
    labels = config_labels(p.config for p in points)
    look = looks(labels)
    note = _bars_note([p.total_band_ms for p in chosen], [p.per_sample_sd_ms for p in chosen])
    fig = _figure(
        title_text(f"Per-sample latency vs batch size at {exact_text(bandwidth_mbps)} Mbit/s", note)
    )
    for config, line in _by_config(chosen).items():
        fig.add_scatter(
            x=[p.batch for p in line],
            y=[p.per_sample_ms for p in line],
            error_y=_per_sample_bars(line),
            name=labels[config],
            legendgroup=config.strategy,
            legendgrouptitle_text=config.strategy,
            showlegend=True,  # a lone line is named too (plotly names none by default)
            mode="lines+markers",
            line=look[config].line(),
            marker_symbol=look[config].symbol,
            hovertemplate="batch %{x}: %{y:.2f} ms per sample<extra>" + labels[config] + "</extra>",
        )
    fig.update_xaxes(title=BATCH_AXIS, **log_ticks([p.batch for p in chosen], swept=True))
    fig.update_yaxes(title="Latency per sample (ms)", rangemode="tozero")
    return fig


def energy_figure(points: Sequence[Point]) -> go.Figure | None:
    """Energy per batch and per sample (J) against batch size, one line per configuration."""
    common = _at_common_bandwidth([p for p in points if p.energy_j is not None])
    if common is None:
        return None
    bandwidth_mbps, chosen = common
    labels = config_labels(p.config for p in points)
    look = looks(labels)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Per batch", "Per sample"))
    note = _bars_note([p.energy_band_j for p in chosen])
    _figure(title_text(f"Energy vs batch size at {exact_text(bandwidth_mbps)} Mbit/s", note), fig)
    for config, line in _by_config(chosen).items():
        for col, values in (
            (1, [p.energy_j for p in line]),
            (2, [p.energy_per_sample_j for p in line]),
        ):
            fig.add_scatter(
                x=[p.batch for p in line],
                y=values,
                error_y=_band_bars(
                    values,
                    [
                        p.energy_band_j if col == 1 else _per_sample(p.energy_band_j, p)
                        for p in line
                    ],
                ),
                name=labels[config],
                legendgroup=config.strategy,
                legendgrouptitle_text=config.strategy,
                showlegend=col == 1,
                mode="lines+markers",
                line=look[config].line(),
                marker_symbol=look[config].symbol,
                hovertemplate=f"batch %{{x}}: {hover_number('y')} J<extra>{labels[config]}</extra>",
                row=1,
                col=col,
            )
    fig.update_xaxes(title=BATCH_AXIS, **log_ticks([p.batch for p in chosen], swept=True))
    fig.update_yaxes(title="Energy per batch (J)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title="Energy per sample (J)", rangemode="tozero", row=1, col=2)
    return fig


def bandwidth_figure(points: Sequence[Point]) -> go.Figure | None:
    """Total latency (ms) against bandwidth for each configuration and batch run at several."""
    lines: dict[tuple[Config, int], list[Point]] = defaultdict(list)
    for point in points:
        lines[(point.config, point.batch)].append(point)
    swept = {slot: line for slot, line in lines.items() if len(line) > 1}
    if not swept:
        return None
    labels = config_labels(config for config, _ in swept)
    look = looks(labels)
    batches = sorted({batch for _, batch in swept})
    drawn = [p for line in swept.values() for p in line]
    note = _bars_note([p.total_band_ms for p in drawn], [p.total_sd_ms for p in drawn])
    fig = _figure(title_text("Total latency vs bandwidth", note))
    for (config, batch), line in swept.items():
        name = f"{labels[config]}, batch {batch}"
        fig.add_scatter(
            x=[p.bandwidth_mbps for p in line],
            y=[p.total_ms for p in line],
            error_y=_band_bars([p.total_ms for p in line], [p.total_band_ms for p in line])
            or _error_bars([p.total_sd_ms for p in line]),
            name=name,
            legendgroup=config.strategy,
            showlegend=False,
            mode="lines+markers",
            line=look[config].line(),
            marker_symbol=symbol(batches.index(batch)),
            hovertemplate=f"{hover_number('x', exact=True)} Mbit/s: %{{y:.1f}} ms"
            f"<extra>{name}</extra>",
        )
    for config, label in labels.items():
        legend_key(fig, label, group=config.strategy, line=look[config].line())
    for at, batch in enumerate(batches):
        marker = {"symbol": symbol(at), "color": "#555"}
        legend_key(fig, f"batch {batch}", group="batch", marker=marker)
    bandwidths = [p.bandwidth_mbps for line in swept.values() for p in line]
    fig.update_xaxes(title="Bandwidth (Mbit/s)", **log_ticks(bandwidths, swept=True))
    fig.update_yaxes(title="Total latency per batch (ms)", rangemode="tozero")
    return fig


def comparison_figure(comparison: Comparison) -> go.Figure | None:
    """Predicted against measured on log axes with the identity line; ms and J apart."""
    points = [
        ParityPoint(p["metric"], key_label(p["key"]), p["measured"], p["predicted"], p["error_pct"])
        for p in comparison.points
    ]
    return parity_figure("Predicted vs measured", points, " per batch")


def report_figures(points: Sequence[Point], comparison: Comparison | None) -> list[go.Figure]:
    """Every figure the data allows, in report order."""
    figures = [
        latency_breakdown_figure(points),
        per_sample_figure(points),
        energy_figure(points),
        bandwidth_figure(points),
        comparison_figure(comparison) if comparison is not None else None,
    ]
    return [fig for fig in figures if fig is not None]
