"""Figures as a paper's reader sees them: no empty plot where a figure has nothing to show,
no point invisible for want of a line, names a reader knows in every legend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest

import edgetwin
from edgetwin.cli import main
from edgetwin.policies.adaptive import POLICY_LABELS
from edgetwin.reports.adaptive import evaluation_figures
from edgetwin.reports.plan import crossover_figures
from tests.conftest import REPO

SCENARIOS = REPO / "scenarios"


def _crossover_answer(tmp_path: Path, bandwidths_mbps: str) -> dict[str, Any]:
    """plan_crossover cut to batch 1 and 8 on 2 devices at the bandwidths given."""
    out = tmp_path / "plan"
    sets = ["axes.batch=[1, 8]", "axes.devices=[2]", f"axes.bandwidth_mbps={bandwidths_mbps}"]
    argv = ["plan", str(SCENARIOS / "plan_crossover.plan.yaml"), "--out", str(out), "--quiet"]
    assert main([*argv, *(a for s in sets for a in ("--set", s)), "--workers", "1"]) == 0
    answer: dict[str, Any] = json.loads((out / "answer.json").read_text())
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
    """A latency curve was drawn as a line only: at one bandwidth it showed nothing."""
    curves = crossover_figures(_crossover_answer(tmp_path, "[400]"))[-1]
    drawn = _drawn(curves)
    assert len(drawn) == 4  # batch 1 and 8, prism on 2 devices and single
    assert all("markers" in t.mode for t in drawn)
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
