"""One way to write the numbers a reader sees (``edgetwin/number_text.py``): progress
lines, a figure's ticks and heatmap cells, its hover text, thousands separated and never
with an exponent. Python's ``g`` wrote a 1,000,000 Mbit/s sweep as ``1e+06`` and a tick at
0.00001 as ``1e-05``; d3-format's ``.4g`` hovered a 13,200 ms TTFT as ``1.320e+4``."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest

import edgetwin
from edgetwin import cli
from edgetwin.configuration import CrowdRun, configuration_label, run_label
from edgetwin.emu.mininet.faults import timeline
from edgetwin.emu.mininet.medium import rate_commands_of
from edgetwin.emu.mininet.topology import build_topology
from edgetwin.network_spec import NetworkSpec
from edgetwin.number_text import count_text, counted, exact_text, figure_text, hover_number
from edgetwin.reports.html import figures_html, read_run, run_figures
from edgetwin.reports.llm import tokens_per_s_figure
from edgetwin.reports.style import categories, log_ticks, tick_label
from edgetwin.sweep_points import Configuration
from tests.conftest import REPO

SCENARIOS = REPO / "scenarios"
G_FORMAT = re.compile(r"%\{[^}:]*:[^}]*g\}")  # a hovertemplate number in d3's g format


def test_a_progress_line_names_a_large_bandwidth_without_an_exponent() -> None:
    config = Configuration(strategy="prism", devices=2, batch=8, bandwidth_mbps=1_000_000.0, cr=9.9)
    assert configuration_label(config) == "prism cr 9.9 x2, batch 8, 1,000,000 Mbps"
    decoder = config.model_copy(update={"prompt_tokens": 2048, "output_tokens": 128})
    assert configuration_label(decoder).endswith("1,000,000 Mbps, prompt 2,048, 128 out")


def test_heatmap_cells_and_ticks_write_numbers_as_the_answers_do() -> None:
    assert categories([100.0, 1_000_000.0, 0.5]) == ["100", "1,000,000", "0.5"]
    swept = log_ticks([0.00001, 0.00003, 1_000_000.0], swept=True)["ticktext"]
    assert swept == ["0.00001", "0.00003", "1,000,000"]
    assert [tick_label(v) for v in (0.0000123, 17.71, 4093.0)] == ["0.0000123", "17.7", "4,090"]
    assert [exact_text(v) for v in (1e6, 0.00001)] == ["1,000,000", "0.00001"]
    assert figure_text(13215.4) == "13,215"


@pytest.mark.timeout(120)
def test_no_figure_hovers_a_number_in_g_format(tmp_path: Path) -> None:
    """Every hover of a decoder's and an encoder's run page asks d3 for ``hover_number``'s
    formats (``%{y:,.4~r}``: 13,200 ms), none for ``g``."""
    figures = []
    for name in ("llm_smoke", "prism_jetson"):
        edgetwin.run(SCENARIOS / f"{name}.yaml", out=tmp_path / name)
        figures += run_figures(read_run(tmp_path / name))
    hovers = [t.hovertemplate for fig in figures for t in fig.data if t.hovertemplate]
    assert hovers and not [h for h in hovers if G_FORMAT.search(h)]
    assert any(hover_number("y") in h for h in hovers)
    assert any(hover_number("x", exact=True) in h for h in hovers)


def test_a_crowd_run_a_fault_and_a_launch_are_named_without_an_exponent() -> None:
    """``g`` named a crowd run at 1,000,000 Mbit/s ``... 1e+06 Mbps rep 0`` on its progress
    line, in its errors and in ``faults.csv``'s ``run`` column, and a step to 0.000025
    Mbit/s ``2.5e-05 Mbps`` in its ``detail``."""
    assert run_label(CrowdRun("crowdio_streaming", "affinity", 0, 1e6)) == (
        "crowdio_streaming affinity 1,000,000 Mbps rep 0"
    )
    network = NetworkSpec(schedule=[{"at_ms": 0, "bandwidth_mbps": 2.5e-5}])
    (step,) = timeline(build_topology(2), network)
    assert step.detail == "0.000025 Mbps"


def test_a_tc_command_line_is_shown_without_an_exponent() -> None:
    """A failed command is shown to the user (``EmuError``) as its ``line``; its argument
    stays the one tc reads."""
    network = NetworkSpec(bandwidth_mbps=2e6)
    (command, *_) = rate_commands_of(build_topology(2), network, 2e6)
    assert "2e+06mbit" in command.argv
    assert "rate 2000000mbit ceil 2000000mbit" in command.line
    assert "e+" not in command.line


@pytest.mark.parametrize(
    ("item", "expect"),
    [
        (  # a month in ms: 2.6784e+09
            "network.schedule=[{at_ms: 1e10, bandwidth_mbps: 5}]",
            "a month of simulated time, 2,678,400,000 ms",
        ),
        (
            "sweeps.0.bandwidth_mbps=[0.000001]",
            "from 0.000008 Mbps (8 bit/s) to 10,000,000,000,000",
        ),
    ],
    ids=["schedule-month", "tc-rates"],
)
def test_an_error_writes_its_limits_without_an_exponent(
    item: str, expect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "crowd_city" if "schedule" in item else "emu_smoke"
    argv = ["run", str(SCENARIOS / f"{name}.yaml"), "--mode", "emu", "--set", item]
    assert cli.main([*argv, "--out", "/nonexistent/out"]) == 2
    err = capsys.readouterr().err
    assert expect in err and "e+" not in err and "e-0" not in err, err


@pytest.mark.timeout(120)
def test_the_tokens_per_s_title_writes_a_long_prompt_as_the_answers_do(tmp_path: Path) -> None:
    edgetwin.run(SCENARIOS / "llm_smoke.yaml", out=tmp_path / "run")
    rows = [replace(row, prompt_tokens=2048) for row in read_run(tmp_path / "run").rows]
    figure = tokens_per_s_figure(rows)
    assert figure is not None and ", prompt 2,048, " in figure.layout.title.text


def test_exact_text_leaves_out_float_noise_and_writes_a_number_past_reading_as_python() -> None:
    """A sum's last bit (0.1 + 0.2) is not a digit anyone gave; 1e300's 301 digits, cut to
    fit a message, would misstate it."""
    assert [exact_text(v) for v in (0.1 + 0.2, 1e300, 1e-300)] == ["0.3", "1e+300", "1e-300"]
    assert [exact_text(float("inf")), figure_text(1e300)] == ["inf", "1e+300"]


def test_a_count_worked_out_as_a_float_is_written_whole() -> None:
    """The jobs a horizon brings (``.3g``: ``8.64e+07``) and the cycles a fleet goes through
    are whole, thousands separated; one past reading keeps its exponent."""
    counts = (86_400_000.0, 17_400_004_833.4, 123.6, 0.4)
    assert [count_text(v) for v in counts] == ["86,400,000", "17,400,004,833", "124", "0"]
    assert [count_text(8.64e304), count_text(float("inf"))] == ["8.64e+304", "inf"]


def test_a_count_and_its_noun_are_singular_for_one_and_separated_past_a_thousand() -> None:
    counts = [counted(n, "prompt token") for n in (1, 2, 131_127)]
    assert counts == ["1 prompt token", "2 prompt tokens", "131,127 prompt tokens"]


def _page_traces(html: str) -> list[dict[str, Any]]:
    """The traces of the one figure of ``html``, as its page gives plotly.js them."""
    start = html.index("Plotly.newPlot(")
    data = html[html.index("[", start) :]
    traces, _ = json.JSONDecoder().raw_decode(data)
    assert isinstance(traces, list)
    return traces


def test_a_page_hovers_a_measured_number_with_the_digits_of_the_text_beside_it() -> None:
    """d3's ``~r`` hovered 13,215.4 ms as 13,220 where the answers' text says 13,215 (and a
    heatmap cell's lowest latency likewise): the page's figure JSON now carries each
    point's number as ``figure_text`` writes it, a small one to four digits as before."""
    line = go.Scatter(
        x=[1, 2, 3], y=[13215.4, 67.04, None], hovertemplate=f"{hover_number('y')} ms"
    )
    best = go.Heatmap(
        x=["100", "200"],
        y=["8"],
        z=[[0, 1]],
        customdata=[[21537.2, 0.0001234567]],
        hovertemplate=f"%{{x}} Mbit/s: {hover_number('customdata')} ms",
    )
    line_json, best_json = (
        _page_traces(figures_html([go.Figure(trace)]))[0] for trace in (line, best)
    )
    assert line_json["hovertemplate"] == ["13,215 ms", "67.04 ms", " ms"]
    assert best_json["hovertemplate"] == "%{x} Mbit/s: %{customdata} ms"
    assert best_json["customdata"] == [["21,537", "0.0001235"]]
    assert figure_text(13215.4) == "13,215" and figure_text(21537.2) == "21,537"
