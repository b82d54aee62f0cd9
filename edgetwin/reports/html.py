"""The self-contained HTML report of a run directory."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from html import escape
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from edgetwin.atomic import write_text_atomic
from edgetwin.comparison import Comparison, compare_to_reference, key_label
from edgetwin.links import read_link_warnings
from edgetwin.reports.crowd import Records, crowd_figures, is_crowd
from edgetwin.reports.figures import HEIGHT_PX, comparison_figure, report_figures
from edgetwin.reports.rows import average_reps
from edgetwin.results import ResultRow, read_results, read_table

REPORT_NAME = "report.html"
STYLE = """
body { font-family: system-ui, sans-serif; margin: 0 auto; padding: 1em 2em;
       max-width: 1200px; box-sizing: border-box; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child, .text { text-align: left; }
section.figure { margin: 1.5em 0; }
.warning { background: #fff3cd; border: 1px solid #e0b400; padding: 0.5em 1em; }
"""


def _values(rows: Sequence[ResultRow], attr: str) -> str:
    return ", ".join(sorted({str(getattr(row, attr)) for row in rows})) or "none"


def _warnings_html(warnings: Sequence[str]) -> str:
    """One highlighted line per warning (links that fell short of their rate)."""
    return "".join(f"<p class='warning'><b>Warning:</b> {escape(w)}</p>" for w in warnings)


def _summary(rows: Sequence[ResultRow]) -> str:
    statuses = Counter(row.status for row in rows)
    status_text = ", ".join(f"{count} {status}" for status, count in sorted(statuses.items()))
    items = [
        ("Scenario", _values(rows, "scenario")),
        ("Mode", _values(rows, "mode")),
        ("Rows", f"{len(rows)} ({status_text or 'none'})"),
        ("Strategies", _values(rows, "strategy")),
    ]
    body = "".join(f"<li><b>{name}:</b> {escape(text)}</li>" for name, text in items)
    return f"<ul class='summary'>{body}</ul>"


def figure_html(fig: go.Figure) -> str:
    """One figure as an HTML section (plotly.js is inlined once by ``page``)."""
    body = pio.to_html(
        fig,
        full_html=False,
        include_plotlyjs=False,
        default_height=f"{HEIGHT_PX}px",
        config={"displaylogo": False},
    )
    return f"<section class='figure'>{body}</section>"


def page(title: str, body: str) -> str:
    """A self-contained HTML page: styles and plotly.js inlined, works offline."""
    return (
        "<!DOCTYPE html>\n<html lang='en'>\n<head>"
        f"<meta charset='utf-8'><title>{escape(title)}</title><style>{STYLE}</style>"
        f"<script>{get_plotlyjs()}</script></head>\n<body>"
        f"<h1>{escape(title)}</h1>{body}</body>\n</html>\n"
    )


def _figures_html(rows: Sequence[ResultRow], comparison: Comparison | None) -> str:
    figures = report_figures(average_reps(rows), comparison)
    if not figures:
        return "<p>No successful rows to plot.</p>"
    return "".join(figure_html(fig) for fig in figures)


def _comparison_html(comparison: Comparison) -> str:
    medians = "".join(
        f"<tr><td>{escape(metric)}</td><td>{value:.1f}</td></tr>"
        for metric, value in comparison.median_abs_error_pct.items()
    )
    points = "".join(
        f"<tr><td>{escape(p['metric'])}</td><td class='text'>{escape(key_label(p['key']))}</td>"
        f"<td>{p['measured']:.4g}</td><td>{p['predicted']:.4g}</td>"
        f"<td>{'n/a' if p['error_pct'] is None else format(p['error_pct'], '+.1f')}</td></tr>"
        for p in comparison.points
    )
    unmatched = ""
    if comparison.unmatched_keys:
        keys = "; ".join(key_label(key) for key in comparison.unmatched_keys)
        unmatched = f"<p>Reference rows with no successful result: {escape(keys)}.</p>"
    return (
        "<h2>Error against reference</h2>"
        "<p>Error = (predicted &minus; measured) / measured; n/a where measured is 0.</p>"
        "<table><tr><th>Metric</th><th>Median |error| (%)</th></tr>"
        f"{medians}</table>"
        "<table><tr><th>Metric</th><th class='text'>Configuration</th><th>Measured</th>"
        f"<th>Predicted</th><th>Error (%)</th></tr>{points}</table>{unmatched}"
    )


def write_comparison_report(out_dir: Path, title: str, comparison: Comparison) -> Path:
    """``comparison.html``: predicted vs measured, the figure and every point's error."""
    figure = comparison_figure(comparison)
    body = (figure_html(figure) if figure is not None else "") + _comparison_html(comparison)
    path = out_dir / "comparison.html"
    write_text_atomic(path, page(title, body))
    return path


def render_report(
    title: str,
    rows: Sequence[ResultRow],
    comparison: Comparison | None,
    crowd_records: Records | None = None,
    warnings: Sequence[str] = (),
) -> str:
    """The report page as one HTML string, with plotly.js inlined once; ``warnings`` on top."""
    compared = "" if comparison is None else _comparison_html(comparison)
    if is_crowd(rows):
        figures = "".join(figure_html(fig) for fig in crowd_figures(rows, crowd_records))
    else:
        figures = _figures_html(rows, comparison)
    return page(title, f"{_warnings_html(warnings)}{_summary(rows)}{figures}{compared}")


def write_report(run_dir: Path, title: str | None = None) -> Path:
    """Write ``run_dir/report.html`` from ``results.csv`` (and ``reference.csv``; for crowd
    runs, ``timeline.json``; for emulator runs, ``link_check.csv``'s warnings)."""
    rows = read_results(run_dir / "results.csv")
    reference_path = run_dir / "reference.csv"
    comparison = (
        compare_to_reference(rows, read_table(reference_path)) if reference_path.exists() else None
    )
    if title is None:
        title = f"edgetwin report: {_values(rows, 'scenario')}"
    timeline_path = run_dir / "timeline.json"
    records = json.loads(timeline_path.read_text()) if timeline_path.exists() else None
    path = run_dir / REPORT_NAME
    warnings = read_link_warnings(run_dir / "link_check.csv")
    write_text_atomic(path, render_report(title, rows, comparison, records, warnings))
    return path
