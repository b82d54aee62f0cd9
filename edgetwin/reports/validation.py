"""The held-out validation page: predicted vs measured for points left out of the fit."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go

from edgetwin.atomic import write_text_atomic
from edgetwin.calibration.held_out import HOLDOUT_NAMES, HoldoutBy, coverage_detail
from edgetwin.number_text import figure_text
from edgetwin.reports.html import figures_html, page
from edgetwin.reports.parity import ParityPoint, parity_figure

VALIDATION_PAGE = "validation.html"


def summarise(points: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per metric: number of points, mean, median and max absolute % error."""
    errors: dict[str, list[float]] = defaultdict(list)
    for point in points:
        errors[str(point["metric"])].append(abs(float(point["error_pct"])))
    return {
        metric: {
            "points": len(values),
            "mape_pct": round(float(np.mean(values)), 2),
            "median_abs_error_pct": round(float(np.median(values)), 2),
            "max_abs_error_pct": round(float(np.max(values)), 2),
        }
        for metric, values in errors.items()
    }


def _coverage_cell(stats: Mapping[str, float], by: HoldoutBy) -> str:
    """Held-out coverage of the metric's 90 % band ('' without one, 'not known'), and where
    it misses."""
    if not stats.get("coverage_repetitions"):
        return "not known" if "coverage_90_pct" in stats else ""
    covered, held_out = stats["coverage_90_pct"], stats["coverage_repetitions"]
    return f"{covered:.1f} % of {held_out:.0f} repetitions ({coverage_detail(stats, by)})"


def validation_figures(points: Sequence[Mapping[str, Any]]) -> list[go.Figure]:
    """Every figure of the validation page: the parity figure, where there are points."""
    figure = _parity_figure(points)
    return [] if figure is None else [figure]


def _parity_figure(points: Sequence[Mapping[str, Any]]) -> go.Figure | None:
    """The held-out points, predicted against measured: times (ms) and energy (J) apart."""
    pairs = [
        ParityPoint(
            str(p["metric"]),
            str(p["point"]),
            float(p["measured"]),
            float(p["predicted"]),
            float(p["error_pct"]),
        )
        for p in points
    ]
    return parity_figure("Held-out points: predicted vs measured", pairs)


def write_validation_report(
    out_dir: Path,
    title: str,
    points: Sequence[Mapping[str, Any]],
    summary: Mapping[str, Mapping[str, float]] | None = None,
    held_out_by: HoldoutBy = "batch",
) -> Path:
    """Write ``validation.html`` with the summary (``summarise``'s, or one with coverage),
    the parity figure and every point; ``held_out_by``: what each fit left out (``validate
    --by``)."""
    summary = summary or summarise(points)
    rows = "".join(
        f"<tr><td>{escape(m)}</td><td>{s['points']:.0f}</td><td>{s['mape_pct']:.1f}</td>"
        f"<td>{s['median_abs_error_pct']:.1f}</td><td>{s['max_abs_error_pct']:.1f}</td>"
        f"<td>{escape(_coverage_cell(s, held_out_by))}</td></tr>"
        for m, s in summary.items()
    )
    detail = "".join(
        f"<tr><td>{escape(str(p['metric']))}</td><td class='text'>{escape(str(p['point']))}</td>"
        f"<td>{figure_text(p['measured'])}</td><td>{figure_text(p['predicted'])}</td>"
        f"<td>{p['error_pct']:+.1f}</td></tr>"
        for p in points
    )
    body = (
        f"<p>Each point was predicted by a profile fitted without its "
        f"{escape(HOLDOUT_NAMES[held_out_by])}.</p>"
        "<table><tr><th>Metric</th><th>Points</th><th>MAPE (%)</th><th>Median |error| (%)</th>"
        "<th>Max |error| (%)</th><th>90 % interval coverage</th></tr>"
        f"{rows}</table>"
        f"{figures_html(validation_figures(points))}"
        "<table><tr><th>Metric</th><th class='text'>Point</th><th>Measured</th><th>Predicted</th>"
        f"<th>Error (%)</th></tr>{detail}</table>"
    )
    path = out_dir / VALIDATION_PAGE
    write_text_atomic(path, page(title, body))
    return path
