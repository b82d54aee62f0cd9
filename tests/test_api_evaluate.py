"""``edgetwin.evaluate_adaptive`` and ``edgetwin.evaluate_affinity``: the policy evaluations of
``edgetwin evaluate`` and ``edgetwin evaluate-affinity`` from Python, the same figures
and files, bad arguments named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import edgetwin
from edgetwin.cli import main
from edgetwin.errors import InputError

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
ADAPTIVE = SCENARIOS / "adaptive_prism.eval.yaml"
AFFINITY = SCENARIOS / "affinity_small.eval.yaml"


@pytest.mark.timeout(300)
def test_evaluate_scores_the_policies_as_the_command_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", str(ADAPTIVE), "--out", str(tmp_path / "cli"), "--quiet"]) == 0
    printed = capsys.readouterr().out.splitlines()
    steps: list[tuple[str, int]] = []

    def shown(label: str, total: int):  # type: ignore[no-untyped-def]
        from contextlib import nullcontext

        steps.append((label, total))
        return nullcontext(lambda: None)

    result = edgetwin.evaluate_adaptive(ADAPTIVE, out=tmp_path / "api", progress=shown)
    cli = json.loads((tmp_path / "cli" / "evaluation.json").read_text())
    api = json.loads((tmp_path / "api" / "evaluation.json").read_text())
    assert api == cli == json.loads(json.dumps(result.to_json()))
    # an Evaluation had no describe(): the ground truth's line was the command's alone
    assert result.describe() == printed[:-1]  # the last: the files written
    assert result.describe()[0] == "ground truth: twin, 40 conditions"
    assert steps and steps[0][0] == "evaluate adaptive_prism.eval.yaml, twin sweeps"
    recorded = json.loads((tmp_path / "api" / "provenance.json").read_text())
    assert recorded["command"] == ["edgetwin.evaluate_adaptive", str(ADAPTIVE)]
    assert str(ADAPTIVE) in recorded["inputs"]


@pytest.mark.timeout(300)
def test_evaluate_affinity_scores_the_schedulers_as_the_command_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate-affinity", str(AFFINITY), "--out", str(tmp_path / "cli")]) == 0
    printed = capsys.readouterr().out.splitlines()
    result = edgetwin.evaluate_affinity(AFFINITY, out=tmp_path / "api")
    cli = json.loads((tmp_path / "cli" / "affinity.json").read_text())
    assert json.loads((tmp_path / "api" / "affinity.json").read_text()) == cli
    assert [i.name for i in result.instances] == [i["instance"] for i in cli["instances"]]
    # the optimum's makespan and each scheduler's regret were the command's lines alone
    assert result.describe() == printed[:-1]  # the last: the files written
    assert len(printed) == len(result.instances) + 1
    for instance in result.instances:  # no scheduler beats the offline optimum
        assert all(s.regret_pct >= -1e-6 for s in instance.schedulers.values())
    recorded = json.loads((tmp_path / "api" / "provenance.json").read_text())
    assert recorded["command"] == ["edgetwin.evaluate_affinity", str(AFFINITY)]


@pytest.mark.timeout(300)
def test_evaluate_affinity_records_the_mode_it_was_given(tmp_path: Path) -> None:
    """A ``mode`` given was left out of ``provenance.json``'s command (run's records it):
    the call recorded ran the file's mode."""
    edgetwin.evaluate_affinity(AFFINITY, mode="twin", out=tmp_path / "out")
    recorded = json.loads((tmp_path / "out" / "provenance.json").read_text())
    assert recorded["command"] == ["edgetwin.evaluate_affinity", str(AFFINITY), "mode=twin"]


@pytest.mark.timeout(120)
def test_bad_evaluation_arguments_name_the_argument_or_the_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as raised:
        edgetwin.evaluate_adaptive(ADAPTIVE, overrides="objective=fast", out=tmp_path / "a")
    assert raised.value.field == "overrides"
    with pytest.raises(InputError) as raised:
        edgetwin.evaluate_adaptive(ADAPTIVE, overrides=["objective=fast"], out=tmp_path / "a")
    assert (raised.value.path, raised.value.field) == (str(ADAPTIVE), "objective")
    with pytest.raises(InputError) as raised:
        edgetwin.evaluate_affinity(AFFINITY, mode="hardware")  # type: ignore[arg-type]
    assert raised.value.field == "mode"
    with pytest.raises(InputError) as raised:
        edgetwin.evaluate_affinity(AFFINITY, out=tmp_path / "a", force="yes")  # type: ignore[arg-type]
    assert raised.value.field == "force"
    assert not (tmp_path / "a").exists()
