"""Figures as a paper's reader sees them: no empty plot where a figure has nothing to show,
no point invisible for want of a line, names a reader knows in every legend."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest

import edgetwin
from edgetwin.cli import main
from edgetwin.policies.adaptive import POLICY_LABELS
from edgetwin.reports.adaptive import evaluation_figures
from edgetwin.reports.plan import crossover_figures, plan_figures
from tests.conftest import REPO
from tests.test_plan_capacity import capacity_question

SCENARIOS = REPO / "scenarios"


def _crossover_answer(tmp_path: Path, bandwidths_mbps: str) -> dict[str, Any]:
    """plan_crossover cut to batch 1 and 8 on 2 devices at the bandwidths given."""
    out = tmp_path / "plan"
    sets = ["axes.batch=[1, 8]", "axes.devices=[2]", f"axes.bandwidth_mbps={bandwidths_mbps}"]
    argv = ["plan", str(SCENARIOS / "plan_crossover.plan.yaml"), "--out", str(out), "--quiet"]
    assert main([*argv, *(a for s in sets for a in ("--set", s)), "--workers", "1"]) == 0
    return _answer(out / "answer.json")


def _answer(path: Path) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(path.read_text())
    return answer


def _drawn(fig: go.Figure) -> list[Any]:
    """The traces that draw data (a legend key is one point at None)."""
    return [t for t in fig.data if t.x != (None,) and any(y is not None for y in t.y)]


@pytest.mark.timeout(120)
def test_a_crossover_plan_that_crosses_nowhere_draws_no_empty_figure(tmp_path: Path) -> None:
    """At one bandwidth no batch has a crossover: the crossover figure was an empty plot
    with a y axis from -1 to 4 Mbit/s. The page's text says where the strategy wins."""
    answer = _crossover_answer(tmp_path, "[400]")
    assert all(c["crossover_mbps"] is None for c in answer["curves"])
    figures = crossover_figures(answer)
    assert figures and all(_drawn(fig) for fig in figures)
    assert [fig.layout.title.text for fig in figures] == [
        "Latency vs bandwidth: best prism variant and single"
    ]


@pytest.mark.timeout(120)
def test_a_curve_of_one_bandwidth_shows_its_point(tmp_path: Path) -> None:
    """A latency curve was drawn as a line only: at one bandwidth it showed nothing. Its
    points, then, tell the deployments apart by marker (a point has no dash)."""
    curves = crossover_figures(_crossover_answer(tmp_path, "[400]"))[-1]
    drawn = _drawn(curves)
    assert len(drawn) == 4  # batch 1 and 8, prism on 2 devices and single
    assert all("markers" in t.mode for t in drawn)
    # a point has no dash: its marker says the deployment, as the legend's key does
    assert len({(t.line.color, t.marker.symbol) for t in drawn}) == len(drawn)
    keys = {t.name: t.marker.symbol for t in curves.data if t.legendgroup == "deployment"}
    assert set(keys) == {"prism, 2 devices", "single device"}
    assert set(keys.values()) == {t.marker.symbol for t in drawn}
    several = crossover_figures(_crossover_answer(tmp_path / "two", "[100, 900]"))[-1]
    assert all(t.mode == "lines" for t in _drawn(several))  # as plan_crossover's 18


@pytest.mark.timeout(120)
def test_evaluation_figures_name_policies_as_a_reader_would() -> None:
    """The regret boxes and the crossover legend said always_single and flop_heuristic,
    the spec's keys, not names for a paper."""
    evaluation = edgetwin.evaluate_adaptive(SCENARIOS / "adaptive_prism.eval.yaml")
    figures = evaluation_figures(evaluation)
    boxes = [t.name for fig in figures for t in fig.data if t.type == "box"]
    assert boxes == ["adaptive", "always single", "always distributed", "FLOP heuristic"]
    keys = [t.name for fig in figures for t in fig.data if t.legendgroup == "policy"]
    assert keys == ["best in the twin", *boxes]
    named = [t.name for fig in figures for t in fig.data if t.name]
    assert not any("_" in name for name in named)
    assert set(POLICY_LABELS) == set(evaluation.scores)


def _axis_titles(fig: go.Figure) -> list[str]:
    layout = fig.layout.to_plotly_json()
    return [v["title"]["text"] for k, v in layout.items() if k[1:5] == "axis" and "title" in v]


@pytest.mark.timeout(180)
def test_a_plans_count_axes_say_what_they_count(tmp_path: Path) -> None:
    """A fleet heatmap's y axis said "Devices", a crowd plan's "Phones in the fleet" and
    "Jobs": every other axis says its quantity and its unit, "Batch size (samples)"."""
    fleet = tmp_path / "fleet"
    sets = ["axes.bandwidth_mbps=[200, 600]", "axes.devices=[2, 4]"]
    argv = ["plan", str(SCENARIOS / "plan_fleet.plan.yaml"), "--out", str(fleet), "--quiet"]
    assert main([*argv, *(a for s in sets for a in ("--set", s)), "--workers", "1"]) == 0
    capacity = tmp_path / "capacity"
    argv = ["plan", str(capacity_question(tmp_path)), "--out", str(capacity), "--quiet"]
    assert main(argv) == 0
    figures = [
        fig for out in (fleet, capacity) for fig in plan_figures(_answer(out / "answer.json"))
    ]
    titles = [title for fig in figures for title in _axis_titles(fig)]
    assert len(titles) == 2 * len(figures)
    assert all(re.fullmatch(r"\w[\w ]+ \([^)]+\)", title) for title in titles), titles


@pytest.mark.timeout(120)
def test_an_evaluation_where_distributed_never_wins_draws_no_empty_crossover() -> None:
    """At batch 1 and 2 one device wins and is picked: the crossover-batch figure was an
    empty plot on a log axis from 0.1 to 10k samples (minor labels and all)."""
    small = [
        "held_out.batch=[1, 2]",
        "held_out.bandwidth_mbps=[300]",
        "policies=[adaptive, always_single]",  # always_distributed picks it everywhere
    ]
    evaluation = edgetwin.evaluate_adaptive(SCENARIOS / "adaptive_prism.eval.yaml", overrides=small)
    who_all = ("oracle", *evaluation.scores)
    assert all(row[who] is None for row in evaluation.crossover_batch() for who in who_all)
    figures = evaluation_figures(evaluation)
    assert figures and all(_drawn(fig) for fig in figures if fig.data[0].type == "scatter")
    assert not any("Crossover batch" in fig.layout.title.text for fig in figures)
