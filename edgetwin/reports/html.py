"""The self-contained HTML report of a run directory."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from html import escape
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio

from edgetwin.atomic import write_text_atomic
from edgetwin.comparison import (
    REFERENCE_FILE,
    Comparison,
    bytes_summary,
    check_reference,
    compare_to_reference,
    key_label,
)
from edgetwin.links import LINK_CHECK_FILE, CheckedLink, link_warnings, read_link_checks
from edgetwin.number_text import figure_text
from edgetwin.reports.crowd import Records, crowd_figures, is_crowd, read_timeline
from edgetwin.reports.figures import comparison_figure, report_figures
from edgetwin.reports.hover_text import hovers_as_text
from edgetwin.reports.link_check import link_check_figure
from edgetwin.reports.llm import (
    Peaks,
    is_decoder,
    llm_figures,
    memory_peaks,
    run_scenario,
    scenario_ram_mb,
)
from edgetwin.reports.plotly_js import deferred, plotly_js_html
from edgetwin.reports.rows import average_reps
from edgetwin.reports.style import FONT, styled
from edgetwin.resolved_scenario import RESOLVED_FILE
from edgetwin.result_cells import read_results
from edgetwin.results import STATUS_OK, ResultRow
from edgetwin.row_keys import RowKey, row_key
from edgetwin.run_failures import failed_summary
from edgetwin.run_warnings import read_warnings_file, shown_once
from edgetwin.scenario import Scenario
from edgetwin.sim.crowd.records import TIMELINE_FILE
from edgetwin.table_files import results_file

REPORT_NAME = "report.html"
COMPARISON_PAGE = "comparison.html"
_NAME_CHARS = 60
_FIGURE_ID = re.compile(r'<div id="([^"]*)" class="plotly-graph-div"')
STYLE = f"""
body {{ font-family: {FONT}; margin: 0 auto; padding: 1em 2em;
       max-width: 1200px; box-sizing: border-box; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }}
th:first-child, td:first-child, .text {{ text-align: left; }}
section.figure {{ margin: 1.5em 0; }}
.warning {{ background: #fff3cd; border: 1px solid #e0b400; padding: 0.5em 1em; }}
"""


def _values(rows: Sequence[ResultRow], attr: str) -> str:
    return ", ".join(sorted({str(getattr(row, attr)) for row in rows})) or "none"


def warnings_html(warnings: Sequence[str]) -> str:
    """One highlighted line per warning (a step that did not play, links that fell short of
    their rate, a RAM line left out), the block every page shows its warnings in on top."""
    return "".join(f"<p class='warning'><b>Warning:</b> {escape(w)}</p>" for w in warnings)


def _summary(rows: Sequence[ResultRow]) -> str:
    finished = sum(row.ok for row in rows)
    items = [
        ("Scenario", _values(rows, "scenario")),
        ("Mode", _values(rows, "mode") + _mode_notes(rows)),
        ("Rows", f"{len(rows)} ({finished} {STATUS_OK}, {failed_summary(rows)})"),
        ("Strategies", _values(rows, "strategy")),
    ]
    body = "".join(f"<li><b>{name}:</b> {escape(text)}</li>" for name, text in items)
    return f"<ul class='summary'>{body}</ul>"


SHOWN_FAILED = 20  # rows that did not finish a page lists before counting the rest


def _failed_html(rows: Sequence[ResultRow]) -> str:
    """The configurations that did not finish and why (the summary counts them by reason
    only, and their rows draw no figure)."""
    failed = [row for row in rows if not row.ok]
    if not failed:
        return ""
    lines = "".join(
        f"<tr><td class='text'>{escape(key_label(row_key(asdict(row))))}</td>"
        f"<td>{row.rep}</td><td class='text'>{escape(row.status)}</td></tr>"
        for row in failed[:SHOWN_FAILED]
    )
    more = len(failed) - SHOWN_FAILED
    rest = f"<p>and {more} more (every one is in results.csv)</p>" if more > 0 else ""
    return (
        f"<p><b>Did not finish</b> ({len(failed)} of {len(rows)} rows):</p>"
        "<table><tr><th class='text'>Configuration</th><th>Rep</th>"
        f"<th class='text'>Status</th></tr>{lines}</table>{rest}"
    )


LOCAL_NOTE = "local: processes on loopback, so the bandwidth is nominal (not shaped)"


def _mode_notes(rows: Sequence[ResultRow]) -> str:
    """What a mode's figures do not show: a local run's links are not shaped."""
    return f" ({LOCAL_NOTE})" if any(row.mode == "local" for row in rows) else ""


def figure_names(figures: Sequence[go.Figure]) -> list[str]:
    """``01_latency_breakdown_per_batch_at_400_mbit_s``: each figure's place and its title's
    first line; figures whose first lines give one name add their clauses (the subtitle's
    too) at the first place where they differ, ``03_lowest_time_to_first_token_ms_prompt_
    2048``, until they are told apart. A figure's static file's name, and its id on the page
    after ``figure-``."""
    mains = [_slug(_title(fig).split("<br>")[0]) or "figure" for fig in figures]
    parts = [_title_parts(fig) for fig in figures]
    told = [""] * len(figures)
    groups: dict[str, list[int]] = defaultdict(list)
    for index, main in enumerate(mains):
        groups[main].append(index)
    for group in groups.values():
        _tell_apart(group, parts, told, 0)
    pairs = zip(mains, told, strict=True)
    return [f"{i:02d}_{main}{more}" for i, (main, more) in enumerate(pairs, start=1)]


def _tell_apart(group: list[int], parts: list[list[str]], told: list[str], place: int) -> None:
    """Add to ``told`` of each title in ``group`` its clause at the first place from
    ``place`` where they differ; again for those alike there, from the next place."""
    if len(group) < 2:
        return

    def at(index: int, place: int) -> str:
        return parts[index][place] if place < len(parts[index]) else ""

    places = range(place, max(len(parts[i]) for i in group))
    differ = next((p for p in places if len({at(i, p) for i in group}) > 1), None)
    if differ is None:
        return
    alike: dict[str, list[int]] = defaultdict(list)
    for index in group:
        clause = at(index, differ)
        told[index] += f"_{_slug(clause)}" if clause else ""
        alike[clause].append(index)
    for same in alike.values():
        _tell_apart(same, parts, told, differ + 1)


def _title(fig: go.Figure) -> str:
    return fig.layout.title.text or "figure"


def _title_parts(fig: go.Figure) -> list[str]:
    """A title's clauses in order, the first line's then the subtitle's (wrapped lines
    joined, markup left out)."""
    main, _, detail = _title(fig).partition("<br>")
    text = [main, re.sub(r"<[^>]*>", "", detail.replace("<br>", " "))]
    return [clause for line in text for clause in line.split(", ") if clause]


def _slug(text: str) -> str:
    """``text`` in lower-case words joined by ``_``, a number whole (``prompt 2,048``:
    ``prompt_2048``), cut at a word's end to _NAME_CHARS (``_kv_cach`` read as a typo)."""
    whole = re.sub(r"(?<=\d),(?=\d{3})", "", text)
    slug = re.sub(r"[^a-z0-9]+", "_", whole.lower()).strip("_")
    if len(slug) > _NAME_CHARS:
        slug = slug[: _NAME_CHARS + 1].rpartition("_")[0] or slug[:_NAME_CHARS]
    return slug


def _figure_html(fig: go.Figure, name: str) -> str:
    """A figure in the edgetwin template, as an HTML section (plotly.js is inlined once by
    ``page``). Its div's id is its name, not plotly's random uuid4: the same figures give
    the same page, byte for byte."""
    fig = hovers_as_text(styled(fig))
    body = pio.to_html(
        fig,
        full_html=False,
        include_plotlyjs=False,
        default_height=f"{fig.layout.height}px",
        config={"displaylogo": False},
        div_id=f"figure-{name}",
    )
    return f"<section class='figure'>{deferred(body)}</section>"


def figures_html(figures: Iterable[go.Figure]) -> str:
    """Every figure of a page, numbered from 1 in page order (``figure_names``)."""
    figures = list(figures)
    names = figure_names(figures)
    return "".join(_figure_html(fig, name) for fig, name in zip(figures, names, strict=True))


def page(title: str, body: str) -> str:
    """A self-contained HTML page: styles and plotly.js (compressed) inlined, works offline.
    Two figures with one id (two ``figures_html`` of one page) are a ValueError."""
    ids = Counter(_FIGURE_ID.findall(body))
    if twice := sorted(name for name, count in ids.items() if count > 1):
        raise ValueError(f"figures with the same id on page {title!r}: {', '.join(twice)}")
    return (
        "<!DOCTYPE html>\n<html lang='en'>\n<head>"
        f"<meta charset='utf-8'><title>{escape(title)}</title><style>{STYLE}</style>"
        f"{plotly_js_html()}</head>\n<body>"
        f"<h1>{escape(title)}</h1>{body}</body>\n</html>\n"
    )


@dataclass(frozen=True)
class Wording:
    """How a comparison section is headed and names the rows with no counterpart
    (``no_measurement`` None: such rows are not listed)."""

    heading: str
    no_prediction: str
    no_measurement: str | None


RUN_WORDING = Wording("Error against reference", "Reference rows with no successful result", None)
COMPARE_WORDING = Wording(
    "Error of the prediction against the measured run",
    "Measured rows with no prediction",
    "Predicted rows with no measured row",
)


def _unmatched_html(label: str | None, keys: Sequence[RowKey]) -> str:
    """One line naming each configuration once; '' without a label or a key."""
    if label is None or not keys:
        return ""
    names = "; ".join(dict.fromkeys(key_label(key) for key in keys))
    return f"<p>{escape(label)}: {escape(names)}.</p>"


def _comparison_html(comparison: Comparison, wording: Wording) -> str:
    if not comparison.points:  # a run's what-if away from every measured configuration
        count = len(dict.fromkeys(comparison.unmatched_keys))
        return (
            f"<h2>{escape(wording.heading)}</h2><p>No configuration of this run is in the "
            f"reference table ({count} measured): nothing to compare. A what-if away from "
            "the measured configurations leaves the table out with --set ~reference.</p>"
        )
    medians = "".join(
        f"<tr><td>{escape(metric)}</td><td>{value:.1f}</td></tr>"
        for metric, value in comparison.median_abs_error_pct.items()
    )
    points = "".join(
        f"<tr><td>{escape(p['metric'])}</td><td class='text'>{escape(key_label(p['key']))}</td>"
        f"<td>{figure_text(p['measured'])}</td><td>{figure_text(p['predicted'])}</td>"
        f"<td>{'n/a' if p['error_pct'] is None else format(p['error_pct'], '+.1f')}</td></tr>"
        for p in comparison.points
    )
    unmatched = _unmatched_html(wording.no_prediction, comparison.unmatched_keys)
    unmatched += _unmatched_html(wording.no_measurement, comparison.unmeasured_keys)
    return (
        f"<h2>{escape(wording.heading)}</h2>"
        "<p>Error = (predicted &minus; measured) / measured; n/a where measured is 0.</p>"
        "<table><tr><th>Metric</th><th>Median |error| (%)</th></tr>"
        f"{medians}</table>"
        "<table><tr><th>Metric</th><th class='text'>Configuration</th><th>Measured</th>"
        f"<th>Predicted</th><th>Error (%)</th></tr>{points}</table>{unmatched}"
        f"{_bytes_html(comparison)}"
    )


def _bytes_html(comparison: Comparison) -> str:
    """The bytes sent of each configuration both sides have them for, with their
    difference, under the line that says whether they agree; '' without such a point."""
    summary = bytes_summary(comparison)
    if summary is None:
        return ""
    rows = "".join(
        f"<tr><td class='text'>{escape(key_label(p['key']))}</td><td>{p['measured']:.0f}</td>"
        f"<td>{p['predicted']:.0f}</td><td>{p['predicted'] - p['measured']:+.0f}</td></tr>"
        for p in comparison.bytes_points
    )
    return (
        f"<h3>Bytes sent (exact)</h3><p>{escape(summary)}</p><table><tr><th class='text'>"
        "Configuration</th><th>Measured</th><th>Predicted</th><th>Predicted &minus; measured"
        f"</th></tr>{rows}</table>"
    )


def comparison_figures(comparison: Comparison) -> list[go.Figure]:
    """Every figure of ``comparison.html``: predicted vs measured, where there are points."""
    figure = comparison_figure(comparison)
    return [] if figure is None else [figure]


def write_comparison_report(out_dir: Path, title: str, comparison: Comparison) -> Path:
    """``comparison.html``: the comparison's warnings on top (other devices, a loopback
    side, another split), then predicted vs measured, the figure and every point's error."""
    body = (
        warnings_html(comparison.warnings)
        + figures_html(comparison_figures(comparison))
        + _comparison_html(comparison, COMPARE_WORDING)
    )
    path = out_dir / COMPARISON_PAGE
    write_text_atomic(path, page(title, body))
    return path


@dataclass(frozen=True)
class RunData:
    """What a run directory holds for its report."""

    rows: list[ResultRow]
    comparison: Comparison | None
    crowd_records: Records | None
    link_checks: list[CheckedLink]
    device_ram_mb: dict[str, float] = field(default_factory=dict)  # decoders' RAM line
    ram_warnings: list[str] = field(default_factory=list)  # RAM lines, memory peaks left out
    run_warnings: Sequence[str] = ()  # what the run warned about (warnings.json)
    memory_peaks: Peaks = field(default_factory=dict)  # decoders' peaks with activations

    @property
    def link_warnings(self) -> list[str]:
        """The warning of every link check outside its tolerance."""
        return link_warnings(self.link_checks)

    @property
    def warnings(self) -> list[str]:
        """What the page warns of on top: what the run warned about, then the link checks
        and the RAM lines left out, each once."""
        return shown_once(self.run_warnings, self.link_warnings, self.ram_warnings)


def page_warnings(
    rows: Sequence[ResultRow],
    link_checks: Sequence[CheckedLink],
    scenario: Scenario | None,
    resolved: Path,
    warned: Sequence[str] = (),
) -> list[str]:
    """``RunData.warnings`` of a run whose rows, link checks, scenario (from ``resolved``;
    None: no such file) and warnings (``warned``) are read, without the files only its
    figures need (a crowd run's timeline, the reference)."""
    decoder = scenario if is_decoder(rows) else None
    ram_mb, left_out = ({}, []) if decoder is None else scenario_ram_mb(decoder, resolved)
    if decoder is not None:
        left_out += memory_peaks(decoder, rows, ram_mb)[1]
    return RunData(list(rows), None, None, list(link_checks), ram_mb, left_out, warned).warnings


def _link_checks(run_dir: Path) -> list[CheckedLink]:
    path = run_dir / LINK_CHECK_FILE
    return read_link_checks(path) if path.exists() else []


def _decoder_memory(
    run_dir: Path, rows: Sequence[ResultRow], scenario: Scenario | None
) -> tuple[dict[str, float], list[str], Peaks]:
    """A decoder run's RAM per device class, the warnings of the classes and the peaks left
    out, and its configurations' peaks with the activations (``memory_peaks``), from ``scenario``
    (``None``: read from the folder's ``scenario.resolved.yaml``; none without it)."""
    if not is_decoder(rows):
        return {}, [], {}
    scenario = run_scenario(run_dir) if scenario is None else scenario
    if scenario is None:
        return {}, [], {}
    ram_mb, warnings = scenario_ram_mb(scenario, run_dir / RESOLVED_FILE)
    peaks, not_drawn = memory_peaks(scenario, rows, ram_mb)
    return ram_mb, [*warnings, *not_drawn], peaks


def read_run(
    run_dir: Path,
    *,
    rows: Sequence[ResultRow] | None = None,
    scenario: Scenario | None = None,
) -> RunData:
    """``results.csv`` (or ``results.parquet``) and, where present, ``reference.csv``
    (checked: ``check_reference``), ``timeline.json`` (crowd runs), ``link_check.csv``
    (emulator runs), the devices' RAM (decoder runs) and ``warnings.json`` (runs that
    warned). ``rows`` and ``scenario``: the run's, when its results table and its
    ``scenario.resolved.yaml`` were read already (``edgetwin report`` checks them first),
    so that each file is read once."""
    rows = read_results(results_file(run_dir)) if rows is None else list(rows)
    reference_path = run_dir / REFERENCE_FILE
    comparison = (
        compare_to_reference(rows, check_reference(reference_path, reference_path, None))
        if reference_path.exists()
        else None
    )
    timeline_path = run_dir / TIMELINE_FILE
    records = read_timeline(timeline_path) if timeline_path.exists() else None
    checks = _link_checks(run_dir)
    ram_mb, ram_warnings, peaks = _decoder_memory(run_dir, rows, scenario)
    warned = read_warnings_file(run_dir)
    return RunData(rows, comparison, records, checks, ram_mb, ram_warnings, warned, peaks)


def run_figures(data: RunData) -> list[go.Figure]:
    """Every figure of a run's page, in page order."""
    if is_crowd(data.rows):
        figures = crowd_figures(data.rows, data.crowd_records)
    elif is_decoder(data.rows):
        figures = llm_figures(data.rows, data.device_ram_mb, data.memory_peaks)
    else:
        figures = report_figures(average_reps(data.rows), data.comparison)
    link_figure = link_check_figure(data.link_checks)
    return figures + ([link_figure] if link_figure is not None else [])


def run_title(data: RunData) -> str:
    """``edgetwin: prism_jetson``: the scenario of the rows (one per run), whoever writes
    the page (``run``, ``report``, ``Results.write``), so that each writes the same page."""
    return f"edgetwin: {_values(data.rows, 'scenario')}"


def render_report(data: RunData, title: str) -> str:
    """The report page as one HTML string, with plotly.js inlined once; its warnings on
    top."""
    compared = "" if data.comparison is None else _comparison_html(data.comparison, RUN_WORDING)
    shown = _no_rows_html(data.rows) + figures_html(run_figures(data))
    warnings = warnings_html(data.warnings)
    failed = _failed_html(data.rows)
    return page(title, f"{warnings}{_summary(data.rows)}{failed}{shown}{compared}")


def _no_rows_html(rows: Sequence[ResultRow]) -> str:
    """Why a page draws no results figure: no row succeeded (a crowd run's timelines or an
    emulator run's link check may still be drawn below it)."""
    return "" if any(row.ok for row in rows) else "<p>No successful rows to plot.</p>"


def write_report(run_dir: Path, title: str | None = None) -> Path:
    """Write ``run_dir/report.html`` from what ``read_run`` reads."""
    return write_run_page(run_dir, read_run(run_dir), title)


def write_run_page(run_dir: Path, data: RunData, title: str | None = None) -> Path:
    """Write ``run_dir/report.html`` from ``data``, the run's files as read."""
    path = run_dir / REPORT_NAME
    write_text_atomic(path, render_report(data, title or run_title(data)))
    return path
