"""Same results, same page: every page edgetwin writes is the same bytes when it is written
again from the same inputs, by another process (another hash seed) into another folder."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import plotly.graph_objects as go
import pytest

from edgetwin.cli import main
from edgetwin.reports.html import figures_html, page
from edgetwin.reports.static import numbered_svg, undated_pdf
from tests.conftest import REPO

SCENARIOS = REPO / "scenarios"
JETSON_SPEC = REPO / "edgetwin" / "calibration" / "specs" / "jetson_orin_nano.yaml"
_DIV_IDS = re.compile(r'<div id="([^"]*)" class="plotly-graph-div"')


def _edgetwin(*args: str | Path, hash_seed: int) -> None:
    """One ``edgetwin`` command in a process of its own, with its own string hashes (set
    and dict orders of strings differ between two such processes)."""
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
    command = [sys.executable, "-m", "edgetwin", *map(str, args)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def _figure_ids(page: Path) -> list[str]:
    return _DIV_IDS.findall(page.read_text(encoding="utf-8"))


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "scenario, options",
    [("prism_jetson.yaml", []), ("crowdio_6stage.yaml", ["--trace"]), ("llm_smoke.yaml", [])],
    ids=["encoder", "crowd-traced", "decoder"],
)
def test_a_run_page_is_the_same_bytes_when_written_again(
    tmp_path: Path, scenario: str, options: list[str]
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for seed, out in enumerate((first, second), start=1):
        _edgetwin("run", SCENARIOS / scenario, *options, "--out", out, "--quiet", hash_seed=seed)
    page = (first / "report.html").read_bytes()
    assert page == (second / "report.html").read_bytes()
    _edgetwin("report", second, hash_seed=3)  # edgetwin report writes what run wrote
    assert page == (second / "report.html").read_bytes()
    ids = _figure_ids(first / "report.html")
    assert len(ids) >= 3 and len(set(ids)) == len(ids)


def _plan(out: Path, seed: int) -> Path:
    _edgetwin("plan", SCENARIOS / "plan_crossover.plan.yaml", "--out", out, hash_seed=seed)
    return out / "plan.html"


def _evaluation(out: Path, seed: int) -> Path:
    spec = SCENARIOS / "adaptive_prism.eval.yaml"
    _edgetwin("evaluate", spec, "--out", out, "--quiet", hash_seed=seed)
    return out / "evaluation.html"


def _affinity(out: Path, seed: int) -> Path:
    spec = SCENARIOS / "affinity_small.eval.yaml"
    _edgetwin("evaluate-affinity", spec, "--out", out, "--quiet", hash_seed=seed)
    return out / "affinity.html"


def _validation(out: Path, seed: int) -> Path:
    _edgetwin("validate", JETSON_SPEC, "--out", out, hash_seed=seed)
    return out / "validation.html"


def _comparison(out: Path, seed: int) -> Path:
    """``compare`` of two prism_jetson runs (seeds 1 and 2): the same two for both pages,
    its inputs, run once beside the pages' folders (a run page's bytes are checked above)."""
    runs = out.parent.parent / "runs"
    if not runs.exists():
        for run_seed in (1, 2):
            scenario = SCENARIOS / "prism_jetson.yaml"
            run = ["run", scenario, "--seed", str(run_seed), "--out", runs / str(run_seed)]
            _edgetwin(*run, "--quiet", hash_seed=seed)
    _edgetwin("compare", runs / "1", runs / "2", "--out", out, hash_seed=seed)
    return out / "comparison.html"


@pytest.mark.timeout(240)
@pytest.mark.parametrize("write_page", [_plan, _evaluation, _affinity, _validation, _comparison])
def test_every_other_page_is_the_same_bytes_when_written_again(
    tmp_path: Path, write_page: Callable[[Path, int], Path]
) -> None:
    first = write_page(tmp_path / "first" / "out", 1)
    second = write_page(tmp_path / "second" / "out", 2)
    assert first.read_bytes() == second.read_bytes()
    ids = _figure_ids(first)
    assert ids and len(set(ids)) == len(ids)


def _figure(title: str) -> go.Figure:
    return go.Figure(go.Scatter(x=[1, 2], y=[3, 4]), layout={"title": {"text": title}})


def test_figure_ids_are_their_place_and_title_and_differ_on_a_page() -> None:
    """Titles whose first lines give one name add their clauses where they differ."""
    figures = [
        _figure("Latency (ms)<br>detail, prompt 128"),
        _figure("Latency (ms)"),
        go.Figure(),
        _figure("Latency (ms)<br>detail, prompt<br>2048"),  # a subtitle wrapped in two lines
        _figure("Energy (J)<br>prompt 128"),
    ]
    html = figures_html(figures)
    assert _DIV_IDS.findall(html) == [
        "figure-01_latency_ms_detail_prompt_128",
        "figure-02_latency_ms",
        "figure-03_figure",
        "figure-04_latency_ms_detail_prompt_2048",
        "figure-05_energy_j",
    ]
    assert html == figures_html(figures)  # no random part
    long = "Time per output token against a prompt, 16 output tokens, kv cache included"
    (named,) = _DIV_IDS.findall(figures_html([_figure(long)]))
    assert named.endswith("_16_output_tokens_kv")  # cut at a word's end, not "_kv_c"


def test_a_page_with_two_figures_of_one_id_is_refused() -> None:
    twice = figures_html([_figure("Energy")]) + figures_html([_figure("Energy")])
    with pytest.raises(ValueError, match="figure-01_energy"):
        page("two lists of figures", twice)


@pytest.mark.browser
@pytest.mark.timeout(240)
@pytest.mark.parametrize("fmt", ["svg", "pdf"])
def test_static_figures_are_the_same_bytes_when_exported_again(tmp_path: Path, fmt: str) -> None:
    """plotly.js names an SVG's clip paths and traces at random, Chromium dates a PDF."""
    if shutil.which("chromium") is None:
        pytest.skip("chromium is not installed (CI installs it)")
    first, second = tmp_path / "first", tmp_path / "second"
    scenario = str(SCENARIOS / "prism_jetson.yaml")
    assert main(["run", scenario, "--set", "sweeps=[{batch: [1, 2]}]", "--out", str(first)]) == 0
    shutil.copytree(first, second)
    for run in (first, second):
        assert main(["report", str(run), "--static", fmt]) == 0
    files = sorted((first / "figures").iterdir())
    assert len(files) >= 3
    for path in files:
        assert path.read_bytes() == (second / "figures" / path.name).read_bytes(), path.name


def test_an_svg_keeps_its_names_apart_and_its_drawing() -> None:
    drawn = (
        '<svg><defs id="defs-123456"><clipPath id="clip123456xyplot"/></defs>'
        '<defs id="topdefs-123456"><clipPath id="legend123456"/></defs>'
        '<g clip-path="url(#clip123456xyplot)"><path d="M1234567,2"/></g>'
        '<use href="#legend123456"/><text>123456</text></svg>'
    )
    assert numbered_svg(drawn, 3) == (
        '<svg><defs id="defs-000003"><clipPath id="clip000003xyplot"/></defs>'
        '<defs id="topdefs-000003"><clipPath id="legend000003"/></defs>'
        '<g clip-path="url(#clip000003xyplot)"><path d="M1234567,2"/></g>'
        '<use href="#legend000003"/><text>123456</text></svg>'
    )
    assert numbered_svg("<svg/>", 1) == "<svg/>"


def test_a_pdf_loses_its_dates_and_keeps_its_offsets() -> None:
    info = (
        b"1 0 obj\n<</Title (Kaleido-fier)\n/Producer (Skia/PDF m156)\n"
        b"/CreationDate (D:20261204222816+00'00')\n/ModDate (D:20261204222816+00'00')>>\nendobj\n"
    )
    undated = undated_pdf(info)
    assert len(undated) == len(info) and b"Date" not in undated and b"2026" not in undated
    assert undated.startswith(b"1 0 obj\n<</Title (Kaleido-fier)\n/Producer (Skia/PDF m156)\n")
    assert undated.endswith(b">>\nendobj\n")
