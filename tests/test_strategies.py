"""The strategy registry: one definition per strategy, read by every layer."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from edgetwin.cli import main
from edgetwin.errors import InputError
from edgetwin.model_spec import ModelSpec
from edgetwin.models import registry
from edgetwin.models.costs import CostPlan, InputSource, position_wise_plan
from edgetwin.models.layout import Layout, segment_means
from edgetwin.models.strategy import Strategy
from edgetwin.result_cells import read_results
from edgetwin.scenario import load_scenario
from tests.conftest import REPO

CONTRACT_NAMES = (
    "single",
    "voltage",
    "prism",
    "tensor_parallel",
    "pipeline",
    "crowdio_streaming",
    "crowdio_barrier",
)


def _string_constants(path: Path) -> set[str]:
    return {
        node.value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def test_contract_names_are_the_registered_ones() -> None:
    assert registry.names() == CONTRACT_NAMES


def test_a_strategy_name_is_a_literal_in_at_most_two_modules() -> None:
    constants = {path: _string_constants(path) for path in (REPO / "edgetwin").rglob("*.py")}
    for name in registry.names():
        modules = sorted(
            str(p.relative_to(REPO)) for p, found in constants.items() if name in found
        )
        assert 1 <= len(modules) <= 2, (name, modules)


def test_labels_have_one_format() -> None:
    assert registry.candidate_label("single", 1) == "single"
    assert registry.candidate_label("voltage", 2) == "voltage x2"
    assert registry.candidate_label("prism", 2, 9.9, 10) == "prism cr 9.9 x2"
    assert registry.candidate_label("prism", 4, None, 10) == "prism L10 x4"
    assert registry.candidate_label("prism", None, 9.9) == "prism cr 9.9"
    key = registry.CandidateKey("tensor_parallel", 4)
    assert (key.label, key.short_label) == ("tensor_parallel x4", "TP4")
    assert registry.CandidateKey("prism", 2, 9.9).short_label == "P9.9x2"
    assert registry.CandidateKey("single", 1).short_label == "S"


def test_unknown_names_are_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown strategy 'ring'; known: single, voltage"):
        registry.strategy("ring")
    with pytest.raises(ValueError, match="no cost plan"):
        registry.cost_plan(ModelSpec(preset="vit_b16"), "crowdio_streaming", 2)
    with pytest.raises(ValueError, match="not position-wise"):
        registry.layout("tensor_parallel", 197, 2)


# ------------------------------------------------------------ a toy strategy, added in the test

TOY_NAME = "one_mean"


def _toy_layout(tokens: int, world: int, segments: int | None) -> Layout:
    return segment_means(tokens, world, 1)


def _toy_plan(
    model: ModelSpec, devices: int, segments: int | None, input_source: InputSource
) -> CostPlan:
    return position_wise_plan(
        TOY_NAME, model, _toy_layout(model.tokens, devices, None), 1, input_source
    )


TOY = Strategy(TOY_NAME, "M", cost_plan=_toy_plan, layout=_toy_layout, selectable=True)


@pytest.fixture
def toy() -> Iterator[Strategy]:
    with registry.registered(TOY) as definition:
        yield definition
    assert TOY_NAME not in registry.names()


def _toy_scenario(tmp_path: Path) -> Path:
    raw = yaml.safe_load((REPO / "scenarios/emu_smoke.yaml").read_text())
    raw |= {
        "name": "toy_strategy",
        "mode": "twin",
        "strategies": [{"name": "single"}, {"name": "voltage"}, {"name": TOY_NAME}],
    }
    raw["devices"][0]["profile"] = "jetson_orin_nano"
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_a_registered_toy_without_real_code_is_refused_by_local_mode(
    toy: Strategy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real code's strategies are the registry's with the ViT worker as their entry
    point: a strategy without one is named before anything runs."""
    scenario_path = _toy_scenario(tmp_path)
    argv = ["run", str(scenario_path), "--mode", "local", "--check"]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "field 'strategies.2.name': one_mean has no real code path; mode 'local' runs" in error


def test_a_registered_toy_runs_in_the_twin_a_plan_and_a_report(
    toy: Strategy, tmp_path: Path
) -> None:
    scenario_path = _toy_scenario(tmp_path)
    assert main(["run", str(scenario_path), "--out", str(tmp_path / "run")]) == 0
    rows = [r for r in read_results(tmp_path / "run/results.csv") if r.strategy == TOY_NAME]
    assert len(rows) == 4 and all(r.status == "ok" and r.total_ms > 0 for r in rows)
    row_bytes = 2 * 768 * 4  # batch 2, fp32
    scatter, means = 98 * row_bytes, 2 * 2 * 1 * row_bytes  # 2 blocks x 2 ranks x one mean
    assert {r.bytes_sent for r in rows} == {scatter + means}
    assert TOY_NAME in (tmp_path / "run/report.html").read_text()

    question = {
        "name": "toy_crossover",
        "scenario": str(scenario_path),
        "axes": {"batch": [1, 8], "bandwidth_mbps": [10, 100, 1000], "devices": [2]},
        "question": {"kind": "crossover", "strategy": {"name": TOY_NAME}},
    }
    question_path = tmp_path / "toy.plan.yaml"
    question_path.write_text(yaml.safe_dump(question))
    out = tmp_path / "plan"
    assert main(["plan", str(question_path), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    answer = json.loads((out / "answer.json").read_text())
    assert answer["strategy"] == TOY_NAME
    variants = {v for curve in answer["curves"] for v in curve["best_variant"]}
    assert variants == {f"{TOY_NAME} x2"}
    assert f"{TOY_NAME} does not beat one device" in (out / "plan.html").read_text()


def test_an_unregistered_strategy_is_a_scenario_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        load_scenario(_toy_scenario(tmp_path))
    assert caught.value.field == "strategies.2.name"
    assert f"unknown strategy '{TOY_NAME}'" in caught.value.problem
