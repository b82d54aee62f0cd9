"""Every other page edgetwin writes (evaluations, plans, comparison, validation) renders in
chromium."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from edgetwin.cli import main
from tests.conftest import REPO
from tests.test_plan_capacity import capacity_question
from tests.test_plan_llm import llm_question
from tests.test_report import _probe
from tests.test_report_llm import llm_run

SCENARIOS = REPO / "scenarios"


def _adaptive(out: Path, _tmp: Path) -> Path:
    assert main(["evaluate", str(SCENARIOS / "adaptive_prism.eval.yaml"), "--out", str(out)]) == 0
    return out / "evaluation.html"


def _affinity(out: Path, _tmp: Path) -> Path:
    spec = SCENARIOS / "affinity_small.eval.yaml"
    assert main(["evaluate-affinity", str(spec), "--out", str(out)]) == 0
    return out / "affinity.html"


def _best_mode_plan(out: Path, _tmp: Path) -> Path:
    assert main(["plan", str(SCENARIOS / "plan_crossover.plan.yaml"), "--out", str(out)]) == 0
    return out / "plan.html"


def _capacity_plan(out: Path, tmp: Path) -> Path:
    question = capacity_question(tmp, axes={"fleet_size": [2, 6]})
    assert main(["plan", str(question), "--out", str(out)]) == 0
    return out / "plan.html"


def _llm_run(out: Path, _tmp: Path) -> Path:
    return llm_run(out) / "report.html"


def _llm_plan(out: Path, tmp: Path) -> Path:
    assert main(["plan", str(llm_question(tmp)), "--out", str(out)]) == 0
    return out / "plan.html"


def _intervals_run(out: Path, _tmp: Path) -> Path:
    """A twin run with prediction intervals: its figures draw them as error bars."""
    scenario = str(SCENARIOS / "h200_bw.yaml")
    assert main(["run", scenario, "--set", "intervals=0.9", "--out", str(out), "--quiet"]) == 0
    return out / "report.html"


def _comparison(out: Path, tmp: Path) -> Path:
    scenario = str(SCENARIOS / "prism_jetson.yaml")
    for seed in (1, 2):
        run = ["run", scenario, "--seed", str(seed), "--out", str(tmp / f"run{seed}"), "--quiet"]
        assert main(run) == 0
    assert main(["compare", str(tmp / "run1"), str(tmp / "run2"), "--out", str(out)]) == 0
    return out / "comparison.html"


def _validation(out: Path, _tmp: Path) -> Path:
    spec = REPO / "edgetwin/calibration/specs/jetson_orin_nano.yaml"
    assert main(["validate", str(spec), "--out", str(out)]) == 0
    return out / "validation.html"


@pytest.mark.browser
@pytest.mark.parametrize(
    "write_page",
    [
        _adaptive,
        _affinity,
        _best_mode_plan,
        _capacity_plan,
        _comparison,
        _validation,
        _llm_run,
        _llm_plan,
        _intervals_run,
    ],
)
def test_page_draws_every_figure_without_script_errors(
    write_page: Callable[[Path, Path], Path], tmp_path: Path
) -> None:
    page = write_page(tmp_path / "out", tmp_path)
    probe = _probe(page, tmp_path)
    assert probe["errors"] == []
    graphs = probe["graphs"]
    assert isinstance(graphs, int) and graphs > 0 and probe["rendered"] == graphs
