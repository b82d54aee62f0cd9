"""Static figures a paper's column wide (3.5 in, 336 px), measured in the exported SVG:
a legend that does not take a figure's height one entry a line, panels whose labels stay
apart, a heatmap's numbers and frames inside their cells."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import edgetwin
from tests.conftest import REPO

SCENARIOS = REPO / "scenarios"
SVG = "{http://www.w3.org/2000/svg}"
DIGIT_EM = 0.556  # Arial's digits are all this wide, a fraction of the font size
# llm_jetson's nine configurations (its legend), at two prompts of four tokens: seconds
LLM_JETSON_SMALL = [
    "workload.output_tokens=4",
    "sweeps=[{prompt_tokens: [128, 512], batch: [1], devices: [2, 4]}]",
]


def _needs_chromium() -> None:
    if shutil.which("chromium") is None:
        pytest.skip("chromium is not installed (CI installs it)")


def _translate(element: ET.Element) -> tuple[float, float]:
    found = re.match(r"translate\(([-0-9.]+),\s*([-0-9.]+)\)", element.get("transform") or "")
    return (0.0, 0.0) if found is None else (float(found.group(1)), float(found.group(2)))


def _plot_box(svg: ET.Element, name: str) -> tuple[float, float, float]:
    """Subplot ``name``'s (``xy``, ``x2y2``) left and right edge and its height, in px."""
    group = svg.find(f".//{SVG}g[@class='{name}']")
    assert group is not None, name
    clip = str(group.get("clip-path"))[5:-1]  # url(#...)
    rect = svg.find(f".//{SVG}clipPath[@id='{clip}']/{SVG}rect")
    assert rect is not None
    left = _translate(group)[0]
    return left, left + float(str(rect.get("width"))), float(str(rect.get("height")))


@pytest.mark.browser
@pytest.mark.timeout(240)
def test_a_column_wide_decoder_figure_has_a_compact_legend_and_panels_apart(
    tmp_path: Path,
) -> None:
    """At 3.5 in llm_jetson's memory figure was 940 px (9.8 in) tall: its legend under the
    plot one entry a line, nine configurations under five group titles and the RAM line
    (15 lines). Its groups now sit side by side, without the titles their entries repeat,
    under the axis's title and inside the figure. TTFT and TPOT side by side put TPOT's
    axis title over the TTFT plot."""
    _needs_chromium()
    out = tmp_path / "run"
    scenario = SCENARIOS / "llm_jetson.yaml"
    edgetwin.run(scenario, overrides=LLM_JETSON_SMALL, out=out, static="svg", width="3.5in")
    (memory,) = (out / "figures").glob("03_memory_per_device*.svg")
    svg = ET.parse(memory).getroot()
    height = float(str(svg.get("height")))
    assert svg.get("width") == "336" and height <= 7.5 * 96
    legend = svg.find(f".//{SVG}g[@class='legend']")
    assert legend is not None
    groups = legend.findall(f".//{SVG}g[@class='groups']")
    entries = legend.findall(f".//{SVG}g[@class='traces']")
    assert len(entries) == 10  # nine configurations and the RAM line, no group title
    rows = {_translate(group)[1] for group in groups}
    assert len(rows) < len(groups)  # some groups side by side
    box = legend.find(f"{SVG}rect[@class='bg']")
    assert box is not None
    top = _translate(legend)[1]
    title = svg.find(f".//{SVG}text[@class='xtitle']")
    assert title is not None
    assert float(str(title.get("y"))) < top  # the axis title's baseline above the legend
    assert top + float(str(box.get("height"))) <= height
    # the two panels: TPOT's axis title (16 px, on its side) right of the TTFT plot
    (panels,) = (out / "figures").glob("01_ttft_and_tpot*.svg")
    svg = ET.parse(panels).getroot()
    _, ttft_right, _ = _plot_box(svg, "xy")
    tpot_title = svg.find(f".//{SVG}text[@class='y2title']")
    assert tpot_title is not None
    assert float(str(tpot_title.get("x"))) - 16 > ttft_right


@pytest.mark.browser
@pytest.mark.timeout(240)
def test_a_column_wide_heatmap_keeps_its_numbers_and_frames_in_their_cells(
    tmp_path: Path,
) -> None:
    """plan_fleet's p95 heatmap at 3.5 in: seven bandwidths make cells about 25 px wide,
    and the frame around each fleet's least bandwidth (34 px) covered its neighbours'
    numbers (the first column's frame reached over the tick labels). Each number (plotly.js
    sizes it to its cell) and each frame stays inside its cell."""
    _needs_chromium()
    out = tmp_path / "plan"
    edgetwin.run_plan(
        SCENARIOS / "plan_fleet.plan.yaml",
        out=out,
        overrides=["set=[devices.0.count=8, repetitions=3, noise_cv=0.05]"],
        workers=1,
        static="svg",
        width="3.5in",
    )
    (figure,) = (out / "figures").glob("*.svg")
    svg = ET.parse(figure).getroot()
    assert svg.get("width") == "336"
    left, right, _ = _plot_box(svg, "xy")
    columns = 7  # the bandwidths swept
    cell_px = (right - left) / columns
    labels = svg.findall(f".//{SVG}g[@class='heatmap-label']/{SVG}text")
    assert len(labels) == columns * 5 and any(len(str(t.text)) == 4 for t in labels)
    for label in labels:
        size_px = float(re.findall(r"font-size: ([0-9.]+)px", str(label.get("style")))[0])
        half_px = DIGIT_EM * size_px * len(str(label.text)) / 2
        x = float(str(label.get("x")))  # from the plot's left edge, the cell's centre
        column = int(x // cell_px)
        assert column * cell_px <= x - half_px and x + half_px <= (column + 1) * cell_px
    frames = svg.findall(f".//{SVG}path[@class='point']")
    assert frames
    for frame in frames:
        half = float(re.findall(r"M([0-9.]+),", str(frame.get("d")))[0])
        assert 2 * half <= cell_px


@pytest.mark.browser
@pytest.mark.timeout(240)
def test_a_column_wide_figure_keeps_a_bar_a_row(tmp_path: Path) -> None:
    """A narrow figure's plot is at most 0.8 of its width tall, but the latency breakdown
    (a bar per configuration and batch, on two levels of categories) keeps its rows."""
    _needs_chromium()
    out = tmp_path / "run"
    batches = ["sweeps=[{batch: [1, 2, 4, 8, 16, 32]}]"]
    edgetwin.run(
        SCENARIOS / "prism_jetson.yaml", overrides=batches, out=out, static="svg", width="3.5in"
    )
    (breakdown,) = (out / "figures").glob("01_latency_breakdown*.svg")
    _, _, plot_px = _plot_box(ET.parse(breakdown).getroot(), "xy")
    assert plot_px >= 22 * 5 * 6  # five configurations, six batches
    (per_sample,) = (out / "figures").glob("02_per_sample*.svg")
    _, _, plot_px = _plot_box(ET.parse(per_sample).getroot(), "xy")
    assert plot_px <= round(0.8 * 336)
