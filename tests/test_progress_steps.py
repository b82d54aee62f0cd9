"""Progress of ``plan``, ``evaluate`` and ``evaluate-affinity``: each step named as it ends
(a plan's units, the map's and the held-out sweeps, the instances), a resumed plan's
units said once, a progress function of no argument still counted."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytest
import yaml

import edgetwin

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
PLAN_SET = ["axes.batch=[8]", "axes.bandwidth_mbps=[100, 900]", "axes.devices=[2]"]


def recorded(seen: list[Any]) -> Any:
    """A progress that records each ``(label, total)`` opened, then each step's name."""

    @contextmanager
    def progress(label: str, total: int) -> Iterator[Any]:
        seen.append((label, total))
        yield seen.append

    return progress


def plan_units() -> list[str]:
    """plan_crossover's units at PLAN_SET: every repetition of a configuration is one."""
    return [
        "single, batch 8, 100 Mbps",
        "single, batch 8, 900 Mbps",
        *(f"prism cr {cr} x2, batch 8, 100 Mbps" for cr in (9.9, 4.95, 3.3)),
        *(f"prism cr {cr} x2, batch 8, 900 Mbps" for cr in (9.9, 4.95, 3.3)),
    ]


@pytest.mark.timeout(300)
def test_a_plan_names_each_unit_and_a_resumed_one_says_what_it_resumed(tmp_path: Path) -> None:
    question = SCENARIOS / "plan_crossover.plan.yaml"
    seen: list[Any] = []
    whole = tmp_path / "whole"
    edgetwin.run_plan(question, out=whole, overrides=PLAN_SET, workers=1, progress=recorded(seen))
    units = plan_units()
    assert seen == [("plan plan_crossover", len(units)), *units]

    stopped: list[Any] = []

    def stop_at_the_third(name: str) -> None:
        stopped.append(name)
        if len(stopped) == 3:
            raise KeyboardInterrupt

    out = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        edgetwin.run_plan(
            question,
            out=out,
            overrides=PLAN_SET,
            workers=1,
            progress=lambda label, total: nullcontext(stop_at_the_third),
        )
    resumed: list[Any] = []
    edgetwin.run_plan(question, out=out, overrides=PLAN_SET, workers=1, progress=recorded(resumed))
    said = f"plan plan_crossover, resumed 3 of {len(units)} units"
    assert resumed == [(said, len(units) - 3), *units[3:]]


@pytest.mark.timeout(300)
def test_a_progress_function_of_no_argument_is_called_once_per_unit(tmp_path: Path) -> None:
    question = SCENARIOS / "plan_crossover.plan.yaml"
    calls: list[None] = []
    edgetwin.run_plan(
        question,
        out=tmp_path / "out",
        overrides=PLAN_SET,
        workers=1,
        progress=lambda label, total: nullcontext(lambda: calls.append(None)),
    )
    assert len(calls) == len(plan_units())


@pytest.mark.timeout(300)
def test_a_crowd_plan_names_the_fleet_size_and_the_run(tmp_path: Path) -> None:
    seen: list[Any] = []
    overrides = ["axes.fleet_size=[3, 4]", "set=[crowd.job.inputs=2, crowd.horizon_s=600]"]
    question = SCENARIOS / "plan_crowd_capacity.plan.yaml"
    edgetwin.run_plan(
        question, out=tmp_path / "out", overrides=overrides, workers=1, progress=recorded(seen)
    )
    label, total = seen[0]
    assert label == "plan plan_crowd_capacity" and total == len(seen) - 1
    assert seen[1] == "3 phones, crowdio_streaming affinity 50 Mbps rep 0"
    assert seen[-1].startswith("4 phones, crowdio_streaming affinity 50 Mbps rep ")


@pytest.mark.timeout(300)
def test_evaluate_names_the_map_s_and_the_held_out_sweeps(tmp_path: Path) -> None:
    seen: list[Any] = []
    small = ["map_tokens=[101, 197]", "held_out.tokens=[65]", "held_out.batch=[1]"]
    spec = SCENARIOS / "adaptive_tokens.eval.yaml"
    edgetwin.evaluate_adaptive(spec, overrides=small, progress=recorded(seen))
    assert seen == [
        ("evaluate adaptive_tokens.eval.yaml, twin sweeps", 3),
        "map, 101 tokens",
        "map, 197 tokens",
        "held-out, 65 tokens",
    ]


def _llm_steps(tmp_path: Path, repetitions: int = 1) -> list[Any]:
    """What ``evaluate_adaptive`` tells a progress of adaptive_llm's evaluation held out at
    one condition, its map profiled at one condition too (the shipped grid's 216 runs are
    named and counted as these are), each run ``repetitions`` times."""
    scenario = yaml.safe_load((SCENARIOS / "adaptive_llm.yaml").read_text())
    scenario["sweeps"] = [{"prompt_tokens": [128], "output_tokens": [16], "batch": [1]}]
    scenario["sweeps"][0] |= {"bandwidth_mbps": [200], "devices": [2]}
    (tmp_path / "llm.yaml").write_text(yaml.safe_dump({**scenario, "repetitions": repetitions}))
    spec = yaml.safe_load((SCENARIOS / "adaptive_llm.eval.yaml").read_text())
    spec["scenario"] = "llm.yaml"
    spec["held_out"] = {"prompt_tokens": [256], "output_tokens": [32], "batch": [2]}
    spec["held_out"] |= {"bandwidth_mbps": [300], "devices": [2]}
    (tmp_path / "llm.eval.yaml").write_text(yaml.safe_dump(spec))
    seen: list[Any] = []
    edgetwin.evaluate_adaptive(tmp_path / "llm.eval.yaml", progress=recorded(seen))
    return seen


@pytest.mark.timeout(300)
def test_evaluate_names_each_decoder_configuration(tmp_path: Path) -> None:
    seen = _llm_steps(tmp_path)
    label, total = seen[0]
    assert label == "evaluate llm.eval.yaml, twin sweeps" and total == len(seen) - 1
    held_out = [name for name in seen[1:] if name.startswith("held-out, ")]
    assert seen[-len(held_out) :] == held_out  # the map first, then the ground truth
    assert held_out[0] == "held-out, single, batch 2, 300 Mbps, prompt 256, 32 out, rep 0"
    assert all(name.startswith("map, ") for name in seen[1 : -len(held_out)])


@pytest.mark.timeout(300)
def test_evaluate_affinity_names_each_instance(tmp_path: Path) -> None:
    seen: list[Any] = []
    spec = SCENARIOS / "affinity_small.eval.yaml"
    edgetwin.evaluate_affinity(spec, progress=recorded(seen))
    assert seen == [
        ("evaluate-affinity affinity_small.eval.yaml (twin), instances", 6),
        "p2_n2_s2_warm",
        "p3_n3_s3_warm",
        "p3_n3_s3_cold",
        "p3_n5_s3_warm",
        "p4_n4_s3_warm",
        "p3_n3_s3_barrier",
    ]


@pytest.mark.timeout(300)
def test_a_decoder_evaluation_counts_each_repetition_in_its_total(tmp_path: Path) -> None:
    """The total counted a decoder's configurations while each repetition is a step: with
    repetitions 2 the steps ran past the total."""
    seen = _llm_steps(tmp_path, repetitions=2)
    _label, total = seen[0]
    assert total == len(seen) - 1 and seen[-1].endswith(", rep 1"), (total, len(seen) - 1)
