"""Paper-ready figures: one template, grouped legends, readable log ticks, titles that fit,
heights that grow, heatmaps on the swept values, the link check, error bars, static files."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import gzip
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from html import escape
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from edgetwin.cli import main
from edgetwin.comparison import compare_to_reference
from edgetwin.number_text import exact_text
from edgetwin.reports import write_report
from edgetwin.reports.figures import (
    bandwidth_figure,
    comparison_figure,
    energy_figure,
    latency_breakdown_figure,
    per_sample_figure,
    strategy_color,
)
from edgetwin.reports.html import SHOWN_FAILED, read_run, run_figures
from edgetwin.reports.parity import ParityPoint, parity_figure
from edgetwin.reports.plan import best_mode_figures, crossover_figures, fleet_figures
from edgetwin.reports.rows import average_reps
from edgetwin.reports.style import (
    FONT,
    TITLE_CHARS,
    log_ticks,
    metric_color,
    styled,
    title_text,
)
from edgetwin.reports.validation import write_validation_report
from edgetwin.results import write_results
from tests.conftest import REPO, PipedRun, SavedEvaluation, ctrl_c_reaches
from tests.test_plan_capacity import capacity_question
from tests.test_plan_llm import llm_question
from tests.test_report import _results, _row
from tests.test_report_llm import llm_run

SCENARIOS = REPO / "scenarios"
LINK_CHECK_CSV = """\
bandwidth_mbps,sender,receiver,goodput_mbps,wire_mbps,error_pct,within_tolerance,latency_ms,latency_emulated,shaped_mbps
100,h1,h2,94.1,99.2,-0.8,True,1.0,False,100
100,h2,h1,80.0,84.3,-15.7,False,1.0,False,100
"""


def _plan_answer(tmp_path: Path, plan: str) -> dict[str, Any]:
    out = tmp_path / plan
    assert main(["plan", str(SCENARIOS / f"{plan}.plan.yaml"), "--out", str(out)]) == 0
    answer: dict[str, Any] = json.loads((out / "answer.json").read_text())
    return answer


def _legend_entries(fig: go.Figure) -> list[str]:
    return [t.name for t in fig.data if t.showlegend is not False]


@pytest.mark.timeout(120)
def test_crossover_legend_is_grouped_and_no_two_curves_look_alike(tmp_path: Path) -> None:
    crossing, curves = crossover_figures(_plan_answer(tmp_path, "plan_crossover"))
    # batches 1 and 2 have no point: the title says why
    assert "no point: prism loses even at 1,000 Mbit/s" in crossing.layout.title.text
    drawn = [t for t in curves.data if t.x != (None,)]
    assert len(drawn) == 18  # 6 batches x (2 fleet sizes + single)
    looks = {(t.line.color, t.line.dash) for t in drawn}
    assert len(looks) == len(drawn)
    assert all(t.hovertemplate.startswith("%{x:,} Mbit/s: %{y:,.4~r} ms") for t in drawn)
    # a key per batch colour and per deployment dash, not one per curve
    assert len(_legend_entries(curves)) == 6 + 3
    assert curves.layout.xaxis.tickvals and curves.layout.yaxis.tickvals


@pytest.mark.timeout(120)
def test_fleet_heatmap_cells_are_the_swept_values_only(tmp_path: Path) -> None:
    answer = _plan_answer(tmp_path, "plan_fleet")
    heat = fleet_figures(answer)[0]
    assert heat.layout.xaxis.type == "category" and heat.layout.yaxis.type == "category"
    assert list(heat.data[0].x) == [exact_text(bw) for bw in answer["bandwidths_mbps"]]
    assert list(heat.data[0].y) == [str(n) for n in answer["devices"]]
    frontier = heat.data[1]  # frames around the cells: a line or a dot hid their numbers
    assert frontier.mode == "markers" and frontier.marker.symbol == "square-open"
    assert "framed: the least bandwidth" in heat.layout.title.text


def test_log_ticks_are_few_and_plain() -> None:
    ticks = log_ticks([15.5, 80.0, 4903.0])
    assert ticks["ticktext"] == ["15.5", "100", "1,000", "4,900"]
    # a narrow axis with one 1-2-3-5 step in it: its ends too (it read "10000" alone)
    assert log_ticks([8953, 11922])["ticktext"] == ["8,950", "10,000", "11,900"]
    assert log_ticks([25, 50, 100, 200, 300, 400, 600, 800, 1000])["ticktext"] == [
        "25",
        "50",
        "100",
        "200",
        "500",
        "1,000",
    ]
    assert log_ticks([1, 2, 4, 8, 16, 32], swept=True)["ticktext"] == [
        "1",
        "2",
        "4",
        "8",
        "16",
        "32",
    ]


def test_breakdown_grows_with_its_rows() -> None:
    configs = [("single", None), ("voltage", None), ("prism", 9.9), ("prism", 4.95), ("prism", 3.3)]
    rows = [
        _row(strategy, batch, 400, 50.0 * batch, cr=cr, segments=None if cr is None else 4)
        for strategy, cr in configs
        for batch in (1, 2, 4, 8, 16, 32, 64, 128, 256)
    ]
    fig = latency_breakdown_figure(average_reps(rows))
    assert fig is not None and len(fig.data[0].y[0]) == 45
    assert fig.layout.height >= 45 * 20  # about 20 px a bar, not 460 px for all
    # the legend lists the stack's parts left to right, compute first (it was reversed)
    assert fig.layout.legend.traceorder == "normal"
    assert [bar.name for bar in fig.data] == ["compute", "staging", "communication"]


def test_a_title_groups_the_digits_of_a_large_bandwidth() -> None:
    rows = [_row("single", 1, 100_000, 5.0), _row("voltage", 1, 100_000, 4.0)]
    fig = latency_breakdown_figure(average_reps(rows))
    assert fig is not None and "at 100,000 Mbit/s" in fig.layout.title.text  # not "100000"


def test_per_sample_figure_has_error_bars_over_the_reps() -> None:
    points = average_reps(_results())
    fig = per_sample_figure(points)
    assert fig is not None
    single = next(t for t in fig.data if t.name == "single")
    # single batch 1 ran twice: 105 and 115 ms, sample standard deviation 7.07 ms
    assert single.error_y.array[0] == pytest.approx(7.0711, rel=1e-3)
    voltage = next(t for t in fig.data if t.name == "voltage")
    assert voltage.error_y.array is None  # one rep: no interval to draw
    assert "error bars: one standard deviation over the repetitions" in fig.layout.title.text


def test_a_lone_configuration_is_named_in_a_legend(tmp_path: Path) -> None:
    """A run left with one configuration (the others out of memory) drew its per-sample
    line unnamed: plotly shows no legend for one trace, the energy figure beside it did."""
    failed = _row("single", 8, 400, 500.0, status="out of memory on jetson-0")
    rows = [_row("prism", 8, 400, 500.0), failed]
    write_results(tmp_path / "results.csv", rows)
    for fig in run_figures(read_run(tmp_path))[1:]:  # the breakdown's legend is its parts
        named = [t for t in fig.data if t.showlegend is not False]
        assert [t.showlegend for t in named] == [True], fig.layout.title.text
        assert named[0].name == "prism cr 9.9"


def test_a_run_page_lists_the_configurations_that_did_not_finish(tmp_path: Path) -> None:
    """The summary counted rows by status ('5 out of memory on jetson-0') and their rows
    draw no figure: which configurations failed was in results.csv alone. The page lists
    them, the first SHOWN_FAILED, then how many more."""
    oom = "out of memory on jetson-0"
    rows = [_row("prism", 8, 400, 500.0)] + [
        _row("single", batch, 400, 500.0, status=oom) for batch in range(1, SHOWN_FAILED + 3)
    ]
    write_results(tmp_path / "results.csv", rows)
    page = write_report(tmp_path).read_text()
    assert f"Did not finish</b> ({SHOWN_FAILED + 2} of {SHOWN_FAILED + 3} rows)" in page
    assert f"single, 1 dev, batch {SHOWN_FAILED}, 400 Mbit/s</td><td>0</td>" in page
    assert f"batch {SHOWN_FAILED + 1}," not in page
    assert "and 2 more (every one is in results.csv)" in page
    write_results(tmp_path / "results.csv", rows[:1])
    assert "Did not finish" not in write_report(tmp_path).read_text()


def test_figures_say_their_error_bars_are_prediction_intervals() -> None:
    rows = [
        _row(strategy, batch, bandwidth, 100.0 * batch, total_ms_lo=90.0 * batch,
             total_ms_hi=120.0 * batch, energy_j=1.0, energy_j_lo=0.8, energy_j_hi=1.3)
        for strategy in ("single", "prism")
        for batch in (1, 4)
        for bandwidth in (100, 400)
    ]  # fmt: skip
    points = average_reps(rows)
    for figure in (per_sample_figure, energy_figure, bandwidth_figure):
        fig = figure(points)
        assert fig is not None
        assert "error bars: the prediction interval of each point" in fig.layout.title.text
    plain = per_sample_figure(average_reps([_row("single", b, 400, 9.0) for b in (1, 2)]))
    assert plain is not None and "error bars" not in plain.layout.title.text  # none drawn


def test_emulator_run_page_shows_the_link_check(tmp_path: Path) -> None:
    write_results(tmp_path / "results.csv", _results())
    (tmp_path / "link_check.csv").write_text(LINK_CHECK_CSV)
    titles = [fig.layout.title.text for fig in run_figures(read_run(tmp_path))]
    assert titles[-1].startswith("Link check")
    text = write_report(tmp_path).read_text()
    assert "Link check" in text and text.count('class="plotly-graph-div"') == 5
    assert "h2 -&gt; h1 set to 100 Mbps" in text  # the warning stays on top


def test_every_warning_the_page_shows_is_printed_and_returned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """edgetwin report printed only the RAM warnings on stderr, not the link check's that
    its page shows; ``report`` and ``load_results`` give the same list in Python."""
    import edgetwin

    write_results(tmp_path / "results.csv", _results())
    (tmp_path / "link_check.csv").write_text(LINK_CHECK_CSV)
    capsys.readouterr()
    assert main(["report", str(tmp_path)]) == 0
    printed = [
        line.removeprefix("edgetwin: warning: ")
        for line in capsys.readouterr().err.splitlines()
        if line.startswith("edgetwin: warning: ")
    ]
    shown = re.findall(r"<b>Warning:</b> ([^<]*)</p>", (tmp_path / "report.html").read_text())
    assert len(printed) == 1 and printed[0].startswith("link h2 -> h1 set to 100 Mbps")
    assert [escape(w) for w in printed] == shown
    assert list(edgetwin.report(tmp_path).warnings) == printed
    assert list(edgetwin.load_results(tmp_path).warnings) == printed


def test_a_link_check_from_before_the_wire_rate_has_no_figure_and_no_warning(
    tmp_path: Path,
) -> None:
    write_results(tmp_path / "results.csv", _results())
    old = "bandwidth_mbps,sender,receiver,goodput_mbps\n100,h1,h2,94.1\n"
    (tmp_path / "link_check.csv").write_text(old)
    data = read_run(tmp_path)
    assert [c.goodput_share for c in data.link_checks] == [pytest.approx(0.941)]
    assert data.link_warnings == []
    assert not any(f.layout.title.text.startswith("Link check") for f in run_figures(data))


def test_a_run_that_checked_no_link_has_no_link_figure(tmp_path: Path) -> None:
    """A run with ``emulator.link_check_s: 0`` writes link_check.csv's header alone."""
    write_results(tmp_path / "results.csv", _results())
    (tmp_path / "link_check.csv").write_text(LINK_CHECK_CSV.splitlines()[0] + "\n")
    data = read_run(tmp_path)
    assert data.link_checks == [] and data.link_warnings == []
    assert "Link check" not in write_report(tmp_path).read_text()


@pytest.mark.parametrize(
    ("row", "field", "problem"),
    [
        ("abc,h1,h2,94.1,99.2,-0.8", "bandwidth_mbps", "'abc' is not a number"),
        ("100,h1,h2,94.1,99.2,nan", "error_pct", "'nan' is not a finite number"),
        ("100,h1,h2,94.1,,-15.7", "wire_mbps", "empty cell"),
        ("100,,h2,94.1,99.2,-0.8", "sender", "empty cell"),
    ],
)
def test_report_names_a_broken_link_check(
    tmp_path: Path, row: str, field: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad cell of link_check.csv was a traceback (ValueError, KeyError) from the
    report's warning reader; now exit 2 naming the file, the column and the line, the
    report kept."""
    write_results(tmp_path / "results.csv", _results())
    (tmp_path / "link_check.csv").write_text(LINK_CHECK_CSV)
    page = write_report(tmp_path).read_bytes()
    header = "bandwidth_mbps,sender,receiver,goodput_mbps,wire_mbps,error_pct"
    (tmp_path / "link_check.csv").write_text(f"{header}\n{row}\n")
    capsys.readouterr()
    assert main(["report", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip()
    path = tmp_path / "link_check.csv"
    assert error == f"edgetwin: error: {path}: field '{field}': line 2: {problem}"
    assert (tmp_path / "report.html").read_bytes() == page


def _title_lines(fig: go.Figure) -> list[str]:
    return [re.sub(r"<[^>]+>", "", line) for line in (fig.layout.title.text or "").split("<br>")]


def _figure_specs(page: str) -> list[dict[str, Any]]:
    """Data and layout of every ``Plotly.newPlot("id", data, layout, config)`` on a page."""
    decoder = json.JSONDecoder()
    specs = []
    for call in re.finditer(r"Plotly\.newPlot\(\s*\"[^\"]+\",\s*", page):
        data, end = decoder.raw_decode(page, call.end())
        layout, _ = decoder.raw_decode(page, page.index("{", end))
        specs.append({"data": data, "layout": layout})
    return specs


@pytest.mark.timeout(120)
def test_adaptive_page_titles_fit_and_every_figure_has_the_template(
    adaptive_devices_evaluation: SavedEvaluation,
) -> None:
    """The page of the session's evaluation of adaptive_devices.eval.yaml
    (tests/test_adaptive_evaluate.py checks its scores)."""
    page = (adaptive_devices_evaluation.folder / "evaluation.html").read_text()
    packed = re.findall(r"<script id='plotly-js-gzip'[^>]*>([^<]*)</script>", page)
    assert len(packed) == 1  # plotly.js inlined once per page, and whole
    assert gzip.decompress(base64.b64decode(packed[0])).decode() == get_plotlyjs()
    specs = _figure_specs(page)
    assert len(specs) == page.count('class="plotly-graph-div"') > 0
    for spec in specs:
        fig = go.Figure(spec)
        assert fig.layout.template.layout.font.family == FONT
        assert all(len(line) <= TITLE_CHARS + 5 for line in _title_lines(fig))
        lines = len(_title_lines(fig))
        assert fig.layout.margin.t >= 20 * lines  # room above the plot for every line
    figures = [go.Figure(spec) for spec in specs]
    cell_colours: dict[str, set[str]] = {}
    for heat in (t for fig in figures for t in fig.data if t.type == "heatmap"):
        for texts, codes in zip(heat.text, heat.z, strict=True):
            for text, code in zip(texts, codes, strict=True):
                if text:
                    cell_colours.setdefault(text, set()).add(_cell_colour(heat, code))
    colours = [colour for seen in cell_colours.values() for colour in seen]
    assert len(colours) == len(set(colours)) == len(cell_colours)  # a candidate, a colour
    # in its strategy's colour, as on the page's lines: single blue, prism in reds
    assert cell_colours["S"] == {strategy_color("single")}
    prism = {
        colour for text, seen in cell_colours.items() if text.startswith("P") for colour in seen
    }
    assert len(prism) > 1 and all(_reddish(colour) for colour in prism)
    # darker with more devices (the map's x2 and x4 came first: x3 was darker than x4)
    shades = [_lightness(next(iter(cell_colours[f"P9.9x{n}"]))) for n in (2, 3, 4, 5)]
    assert shades == sorted(shades, reverse=True) and len(set(shades)) == 4
    boxes = {t.name: t.marker.color for fig in figures for t in fig.data if t.type == "box"}
    keys = {
        t.name: t.line.color
        for fig in figures
        for t in fig.data
        if t.legendgroup == "policy" and t.x == (None,)
    }
    assert len(boxes) > 1 and set(boxes) <= set(keys)
    assert {name: keys[name] for name in boxes} == boxes  # a policy's colour on every figure
    # the best in the twin is drawn wide under the policies, and each policy narrower than
    # the one drawn before it: one matching it, or two picking alike, hid the other
    keyed = [t for fig in figures for t in fig.data if t.legendgroup == "policy"]
    assert keyed[0].name == "best in the twin" and [t.name for t in keyed[1:]] == list(boxes)
    widths = [t.line.width for t in keyed]
    assert widths == sorted(widths, reverse=True) and len(set(widths)) == len(widths)
    crossover = figures[-1]
    drawn = [t for t in crossover.data if t.x != (None,)]
    assert {t.line.width for t in drawn} == set(widths)  # the lines as their keys
    # at each bandwidth the policies' points side by side (two that picked alike hid
    # each other's markers), each hovering the bandwidth itself
    first = drawn[: len(widths)]  # one condition: the ground truth, then each policy
    assert len({t.x[0] for t in first}) == len(first)
    assert {t.customdata[0] for t in first} == {first[0].customdata[0]}
    for trace in first:
        assert list(trace.x) == pytest.approx(list(trace.customdata), rel=0.05)


def _axis_units(fig: go.Figure) -> dict[str, set[str]]:
    """Per x axis of a figure: the unit of every metric drawn on it (the end of its name)."""
    units: dict[str, set[str]] = {}
    for trace in fig.data:
        if trace.name != "predicted = measured":
            units.setdefault(trace.xaxis or "x", set()).add(trace.legendgroup.rsplit("_", 1)[1])
    return units


@pytest.mark.timeout(120)
def test_validation_page_draws_times_and_energy_on_their_own_axes(
    jetson_table_validation: PipedRun,
) -> None:
    """The page of the session's ``validate`` of the Jetson table spec
    (tests/test_cli_guide.py checks its progress lines)."""
    page = (jetson_table_validation.folder / "held_out" / "validation.html").read_text()
    (fig,) = [go.Figure(spec) for spec in _figure_specs(page)]
    assert _axis_units(fig) == {"x": {"ms"}, "x2": {"j"}}
    titles = [(fig.layout[f"{a}axis"].title.text, fig.layout[f"{a}axis2"].title.text) for a in "xy"]
    assert titles == [("Measured (ms)", "Measured (J)"), ("Predicted (ms)", "Predicted (J)")]


def test_a_trace_fits_validation_names_every_metric_in_a_colour_of_its_own() -> None:
    """``validate`` on a trace spec holds out whole-model and staged-exchange points: they
    were named by their columns, in compute's blue and energy's red."""
    metrics = ("vit_full_ms", "compute_ms", "exchange_total_ms", "staging_ms", "comm_ms")
    points = [ParityPoint(m, "batch 1", 2.0 + k, 2.1 + k, 5.0) for k, m in enumerate(metrics)]
    fig = parity_figure("Held-out points", points)
    assert fig is not None
    drawn = [t for t in fig.data if t.name != "predicted = measured"]
    assert [t.name for t in drawn] == [
        "whole model",
        "compute",
        "staged exchange",
        "staging",
        "communication",
    ]
    colours = [t.marker.color for t in drawn]
    assert None not in colours and len(set(colours)) == len(metrics)
    assert not set(colours) & {metric_color("energy_j"), metric_color("total_ms")}


def test_validation_page_without_energy_has_no_energy_panel(tmp_path: Path) -> None:
    points = [
        {"metric": m, "point": f"batch {b}", "measured": v, "predicted": v * 1.1, "error_pct": 10}
        for m, b, v in (("total_ms", 1, 80.0), ("total_ms", 8, 400.0), ("comm_ms", 8, 30.0))
    ]
    page = write_validation_report(tmp_path, "no energy", points).read_text()
    (fig,) = [go.Figure(spec) for spec in _figure_specs(page)]
    assert _axis_units(fig) == {"x": {"ms"}}
    assert fig.layout.xaxis.title.text == "Measured (ms)"
    assert "xaxis2" not in fig.to_dict()["layout"]
    assert "(J)" not in page


def test_a_title_with_a_detail_line_keeps_off_the_top_edge() -> None:
    one_line = styled(go.Figure(layout={"title": "Regret"}))
    two_lines = styled(go.Figure(layout={"title": title_text("Regret", "% of the objective")}))
    single_pad = one_line.layout.title.pad.t or one_line.layout.template.layout.title.pad.t
    # plotly.js draws a title of several lines a line higher: its top touched the edge
    assert two_lines.layout.title.pad.t >= 2 * single_pad


def test_styled_keeps_a_figure_height() -> None:
    assert styled(go.Figure(layout={"height": 900})).layout.height == 900
    assert styled(go.Figure()).layout.height == 460


@pytest.fixture(scope="module")
def prism_jetson_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``run scenarios/prism_jetson.yaml --out``, once for the static export tests: each
    exports from a copy of its own."""
    run = tmp_path_factory.mktemp("prism_jetson") / "run"
    assert main(["run", str(SCENARIOS / "prism_jetson.yaml"), "--out", str(run), "--quiet"]) == 0
    return run


def _static_run(tmp_path: Path, prism_jetson_run: Path) -> Path:
    """A copy of the shared prism_jetson run in ``tmp_path`` (no figures yet)."""
    if shutil.which("chromium") is None:
        pytest.skip("chromium is not installed (CI installs it)")
    run = tmp_path / "run"
    shutil.copytree(prism_jetson_run, run)
    return run


@pytest.mark.browser
@pytest.mark.timeout(240)
def test_report_static_svg_writes_one_parsable_file_per_figure(
    tmp_path: Path, prism_jetson_run: Path
) -> None:
    run = _static_run(tmp_path, prism_jetson_run)
    assert main(["report", str(run), "--static", "svg"]) == 0
    files = sorted((run / "figures").glob("*.svg"))
    titles = [fig.layout.title.text.split("<br>")[0] for fig in run_figures(read_run(run))]
    assert (
        len(files)
        == len(titles)
        == (run / "report.html").read_text().count('class="plotly-graph-div"')
    )
    for path, title in zip(files, titles, strict=True):
        root = ET.parse(path).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert title in "".join(root.itertext())
    assert not list(run.glob(".figures-*"))


@pytest.mark.browser
@pytest.mark.timeout(240)
@pytest.mark.parametrize("fmt, magic", [("png", b"\x89PNG\r\n\x1a\n"), ("pdf", b"%PDF-")])
def test_report_static_png_and_pdf(
    tmp_path: Path, prism_jetson_run: Path, fmt: str, magic: bytes
) -> None:
    run = _static_run(tmp_path, prism_jetson_run)
    assert main(["report", str(run), "--static", fmt]) == 0
    files = sorted((run / "figures").glob(f"*.{fmt}"))
    assert len(files) == 5
    for path in files:
        assert path.stat().st_size > 1000 and path.read_bytes().startswith(magic)


def test_report_static_without_a_browser_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_results(tmp_path / "results.csv", _results())
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-chromium"))
    assert main(["report", str(tmp_path), "--static", "svg"]) == 2
    error = capsys.readouterr().err
    assert "no-chromium" in error and "Chromium" in error and "Traceback" not in error
    # it said "set BROWSER_PATH or put one of chromium, ... on PATH; none found" to a
    # reader who had set BROWSER_PATH: now it says that variable names no file
    assert "BROWSER_PATH names no file" in error and "none found" not in error
    assert not (tmp_path / "figures").exists() and not list(tmp_path.glob(".figures-*"))
    assert not (tmp_path / "report.html").exists()  # it was written, then the error came


@pytest.mark.timeout(120)
def test_report_static_with_a_browser_that_fails_keeps_the_old_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_results(tmp_path / "results.csv", _results())
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "old.svg").write_text("<svg/>")
    monkeypatch.setenv("BROWSER_PATH", shutil.which("true") or "/bin/true")
    assert main(["report", str(tmp_path), "--static", "svg"]) == 1
    error = capsys.readouterr().err
    assert "the browser" in error and "failed" in error and "Traceback" not in error
    assert [p.name for p in (tmp_path / "figures").iterdir()] == ["old.svg"]
    assert not list(tmp_path.glob(".figures-*"))


@pytest.mark.timeout(120)
def test_affinity_schedulers_keep_their_colour_in_every_panel(tmp_path: Path) -> None:
    spec = SCENARIOS / "affinity_small.eval.yaml"
    assert main(["evaluate-affinity", str(spec), "--out", str(tmp_path / "aff")]) == 0
    (spec_of_page,) = _figure_specs((tmp_path / "aff" / "affinity.html").read_text())
    colours: dict[str, set[str]] = {}
    for trace in spec_of_page["data"]:
        if trace["type"] == "bar":
            colours.setdefault(trace["name"], set()).add(trace["marker"]["color"])
    assert len(colours) > 1 and all(len(c) == 1 for c in colours.values())
    assert len({c for (c,) in colours.values()}) == len(colours)


def _untitled_axes(spec: dict[str, Any]) -> list[str]:
    """The axes of a figure spec without a title (plotly.js draws none for them)."""
    axes = [k for k in spec["layout"] if re.fullmatch(r"[xy]axis\d*", k)]
    return [k for k in axes if not spec["layout"][k].get("title", {}).get("text")]


def _hovers_without_units(spec: dict[str, Any]) -> list[str]:
    """Traces that hover plotly's bare ``(x, y)``: neither a template nor skipped."""
    return [
        str(t.get("name"))
        for t in spec["data"]
        if not t.get("hovertemplate") and t.get("hoverinfo") != "skip"
    ]


@pytest.mark.timeout(120)
def test_affinity_figure_titles_its_axes_and_hovers_with_units(tmp_path: Path) -> None:
    spec = SCENARIOS / "affinity_small.eval.yaml"
    assert main(["evaluate-affinity", str(spec), "--out", str(tmp_path / "aff")]) == 0
    (figure,) = _figure_specs((tmp_path / "aff" / "affinity.html").read_text())
    assert _untitled_axes(figure) == [] and _hovers_without_units(figure) == []
    layout = figure["layout"]
    assert layout["yaxis"]["title"]["text"] == "Makespan (s)"
    makespans = [t["hovertemplate"] for t in figure["data"] if t["xaxis"] == "x"]
    assert makespans and all(" s<extra>" in hover for hover in makespans)


REFERENCES = ("RAM of", "target p95", "model positions")


@pytest.mark.timeout(240)
def test_reference_lines_hover_with_their_units(tmp_path: Path) -> None:
    """A device's RAM, a target p95 and the model's positions hovered plotly's bare
    ``(x, y)``: no unit, and on a category axis a candidate's name for x."""
    run_page = llm_run(tmp_path / "run") / "report.html"
    plans = {"llm": llm_question(tmp_path), "capacity": capacity_question(tmp_path)}
    pages = [run_page]
    for name, question in plans.items():
        assert main(["plan", str(question), "--out", str(tmp_path / name), "--quiet"]) == 0
        pages.append(tmp_path / name / "plan.html")
    hovers = []
    for page in pages:
        for figure in _figure_specs(page.read_text()):
            assert _hovers_without_units(figure) == []
            lines = [t for t in figure["data"] if t.get("name", "").startswith(REFERENCES)]
            hovers += [t["hovertemplate"] for t in lines]
    assert any(" MB<extra>" in h for h in hovers) and any(" s<extra>" in h for h in hovers)
    assert any("prompt tokens" in h for h in hovers)


def test_report_static_takes_only_figure_formats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_results(tmp_path / "results.csv", _results())
    with pytest.raises(SystemExit) as exited:
        main(["report", str(tmp_path), "--static", "parquet"])
    assert exited.value.code == 2
    assert "choose from svg, pdf, png" in capsys.readouterr().err.replace("'", "")


def _stopped_export(run: Path, scratch: Path) -> subprocess.Popen[str]:
    """``edgetwin report RUN --static svg`` with ``scratch`` as its temporary folder, once
    the browser has started on its profile there."""
    command = [sys.executable, "-m", "edgetwin", "report", str(run), "--static", "svg"]
    env = {**os.environ, "TMPDIR": str(scratch)}
    proc = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=ctrl_c_reaches
    )
    while not list(scratch.glob("**/Default")):  # the browser has started on its profile
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    return proc


@pytest.mark.browser
@pytest.mark.timeout(240)
def test_a_stopped_static_export_leaves_no_browser_profile(
    tmp_path: Path, prism_jetson_run: Path
) -> None:
    """Ctrl-C while Chromium drew the figures left its profile folder (2 MB) in the
    temporary folder: the export thread outlived the command's clean-up. The command
    now waits for that thread, which closes the browser and removes its folder."""
    run = _static_run(tmp_path, prism_jetson_run)
    # a short TMPDIR: Chromium's sockets in it must fit a socket address (108 bytes)
    with tempfile.TemporaryDirectory(prefix="et-", dir="/tmp") as name:
        scratch = Path(name)
        proc = _stopped_export(run, scratch)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        assert list(scratch.iterdir()) == []
    assert not (run / "figures").exists()


@pytest.mark.browser
@pytest.mark.timeout(240)
def test_a_second_ctrl_c_during_a_static_export_leaves_nothing_behind(
    tmp_path: Path, prism_jetson_run: Path
) -> None:
    """A second Ctrl-C, while the first let Chromium draw its last figures, killed the
    browser, which left its folders in the temporary folder; on Python 3.11 (whose
    interrupted Thread.join marks the thread ended) the browser was not even killed: the
    command ended with Chromium still writing its profile, which stayed, and a traceback
    from the interpreter's exit. Ctrl-C is sent again until the command says so: one sent
    before the first was handled would be taken for it."""
    run = _static_run(tmp_path, prism_jetson_run)
    # (a Chromium left running writes on in its profile as the folder is removed)
    with tempfile.TemporaryDirectory(prefix="et-", dir="/tmp", ignore_cleanup_errors=True) as name:
        scratch = Path(name)
        proc = _stopped_export(run, scratch)
        assert proc.stderr is not None
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr])
        reader.start()
        said: list[str] = []
        while proc.poll() is None and not any("Ctrl-C again" in line for line in said):
            proc.send_signal(signal.SIGINT)
            with contextlib.suppress(queue.Empty):
                said.append(lines.get(timeout=0.05))
        proc.wait(timeout=120)
        reader.join()
        said.extend(lines.queue)
        err = "".join(said)
        assert "Ctrl-C again" in err and proc.returncode == 130, err
        assert err.endswith("edgetwin: interrupted; no output was published\n"), err
        assert list(scratch.iterdir()) == []
    assert not (run / "figures").exists()


def test_swept_log_ticks_name_the_values_swept() -> None:
    ticks = log_ticks([128, 512, 2048, 131072], swept=True)
    assert ticks["ticktext"] == ["128", "512", "2,048", "131,072"]  # not 2,050 or 131,000


def test_a_long_legend_makes_room_for_itself() -> None:
    fig = make_subplots(rows=1, cols=2, subplot_titles=("TTFT", "TPOT"))  # as llm's
    for strategy in ("single", "voltage", "prism", "tensor_parallel", "pipeline"):
        for devices in (2, 4):
            fig.add_scatter(
                x=[1, 2],
                y=[1, 2],
                name=f"{strategy} x{devices}",
                legendgroup=strategy,
                legendgrouptitle_text=strategy,
            )
    fig = styled(fig)
    bottom = fig.layout.template.layout.margin.b
    plot_px = fig.layout.height - fig.layout.margin.t - bottom
    # every entry and group title, and the gaps between groups, fit beside the plot (the
    # static file cut off the last two entries)
    assert plot_px >= 21 * (10 + 5) + 6 * 4


def test_predicted_vs_measured_names_metrics_as_the_breakdown_does_in_its_colours() -> None:
    points = average_reps(_results())
    breakdown = latency_breakdown_figure(points)
    reference = [
        {key: "" if value is None else str(value) for key, value in dataclasses.asdict(r).items()}
        for r in _results()
    ]
    parity = comparison_figure(compare_to_reference(_results(), reference))
    assert breakdown is not None and parity is not None
    bars = {bar.name: bar.marker.color for bar in breakdown.data}
    dots = {t.name: t.marker.color for t in parity.data if t.mode == "markers"}
    assert set(bars) == {"compute", "staging", "communication"}
    assert {"total latency", "compute", "communication", "energy"} <= set(dots)
    assert all(dots[name] == colour for name, colour in bars.items() if name in dots)
    assert not any("_" in name for name in dots)  # no column names in the legend


def _grid(metric: str, best: list[list[str]]) -> dict[str, Any]:
    values = [[1.0] * len(row) for row in best]
    return {"metric": metric, "prompt_tokens": 128, "output_tokens": 16, "best": best,
            "best_value": values}  # fmt: skip


def _cell_colour(heat: Any, code: float) -> str:
    """The colour a heatmap draws for ``code``: the band of its scale the code falls in."""
    at = (code - heat.zmin) / (heat.zmax - heat.zmin)
    bands = zip(heat.colorscale[::2], heat.colorscale[1::2], strict=True)
    (colour,) = {low[1] for low, high in bands if low[0] <= at <= high[0]}
    return str(colour)


def _lightness(colour: str) -> int:
    return sum(int(colour[i : i + 2], 16) for i in (1, 3, 5))


def _reddish(colour: str) -> bool:
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return red > green and red > blue


def test_best_mode_colours_a_candidate_once_and_names_the_pareto_points() -> None:
    def point(candidate: str, strategy: str, prompt: int, latency_ms: float) -> dict[str, Any]:
        return {"latency_ms": latency_ms, "energy_j_per_sample": 1.0, "candidate": candidate,
                "strategy": strategy, "batch": 1, "bandwidth_mbps": 100.0,
                "prompt_tokens": prompt, "output_tokens": 16}  # fmt: skip

    result = {
        "batches": [1],
        "bandwidths_mbps": [100.0, 900.0],
        "grids": [
            _grid("ttft_ms", [["prism cr 4 x2", "prism cr 4 x4"]]),
            _grid("tpot_ms", [["single", "prism cr 4 x4"]]),
        ],
        "pareto": [point("single", "single", 128, 10.0),
                   point("prism cr 4 x2", "prism", 2048, 20.0)],
        "strategy_of": {"single": "single", "prism cr 4 x2": "prism", "prism cr 4 x4": "prism",
                        "voltage x2": "voltage"},
    }  # fmt: skip
    *heatmaps, short_prompt, long_prompt = best_mode_figures(result)
    colours: dict[str, set[str]] = {}
    for heat in heatmaps:
        (trace,) = heat.data
        for name, code in zip(trace.text[0], trace.z[0], strict=True):
            colours.setdefault(name, set()).add(_cell_colour(trace, code))
    assert all(len(seen) == 1 for seen in colours.values()), colours  # one colour a candidate
    assert colours["single"] == {strategy_color("single")}  # the page's lines' colours
    (x2,), (x4,) = colours["prism cr 4 x2"], colours["prism cr 4 x4"]
    assert x2 != x4 and _reddish(x2) and _reddish(x4)  # shades of prism's red
    # a front per workload (one over both prompts averaged runs no one made); a static
    # file has no hover: the points are numbered and named in the title
    assert "prompt 128, 16 output tokens" in short_prompt.layout.title.text
    assert "prompt 2,048, 16 output tokens" in long_prompt.layout.title.text
    assert list(short_prompt.data[0].text) == ["1"]
    for figure, named in (
        (short_prompt, "1 = single, batch 1"),  # the same at every bandwidth: none named
        (long_prompt, "1 = prism cr 4 x2, batch 1, 100 Mbit/s"),
    ):
        named = named.replace(" ", "\u00a0")
        assert named in figure.layout.title.text
    assert "Mbit/s" not in short_prompt.layout.title.text
    marker = long_prompt.data[0].marker.color  # a point in its strategy's colour
    assert list(marker) == [strategy_color("prism")]


def test_a_strategy_keeps_its_colour_in_a_figure_without_the_others() -> None:
    """single ran at one bandwidth only, so the bandwidth figure had no single line: voltage
    took single's colour there."""
    rows = [_row("single", b, 400, 50.0 * b) for b in (1, 4)]
    rows += [_row("voltage", b, bw, 90.0 * b) for b in (1, 4) for bw in (100, 400)]
    points = average_reps(rows)
    per_sample, by_bandwidth = per_sample_figure(points), bandwidth_figure(points)
    assert per_sample is not None and by_bandwidth is not None
    voltage = next(t for t in per_sample.data if t.name == "voltage")
    lines = [t for t in by_bandwidth.data if t.x != (None,)]
    assert lines and {t.line.color for t in lines} == {voltage.line.color}
