"""One way to write the numbers a reader sees (``edgetwin/number_text.py``): progress
lines, a figure's ticks and heatmap cells, its hover text, thousands separated and never
with an exponent. Python's ``g`` wrote a 1,000,000 Mbit/s sweep as ``1e+06`` and a tick at
0.00001 as ``1e-05``; d3-format's ``.4g`` hovered a 13,200 ms TTFT as ``1.320e+4``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import edgetwin
from edgetwin.configuration import configuration_label
from edgetwin.number_text import exact_text, figure_text, hover_number
from edgetwin.reports.html import read_run, run_figures
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
