"""The adaptive policy for a decoder LLM: a map over prompt x output tokens x batch x
bandwidth, the TTFT, TPOT and energy objectives, scored against the twin and a table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from edgetwin import evaluate_adaptive
from edgetwin.cli import main
from edgetwin.errors import InputError
from edgetwin.evaluate.adaptive import evaluate
from edgetwin.evaluate.adaptive_inputs import load_eval_inputs
from edgetwin.evaluate.adaptive_results import Evaluation
from edgetwin.evaluate.measured import median_per_configuration, read_measured
from edgetwin.evaluate.profiling import decoder_rows, decoder_runs
from edgetwin.policies.adaptive import AdaptivePolicy, Objective, make_policy
from edgetwin.policies.perf_map_from_rows import map_from_table
from edgetwin.policies.perf_map_io import read_map, validate_map, write_map
from edgetwin.reports.adaptive import write_evaluation
from edgetwin.results import write_results
from edgetwin.scenario import load_scenario

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "adaptive_llm.yaml"
EVAL = REPO / "scenarios" / "adaptive_llm.eval.yaml"
ENCODER_EVAL = REPO / "scenarios" / "adaptive_prism.eval.yaml"
# a small grid of the shipped scenario on 2 boards (96 twin runs), held out between its points
SMALL_MAP = (
    "sweeps.0.prompt_tokens=[128, 2048]",
    "sweeps.0.output_tokens=[8, 24]",
    "sweeps.0.batch=[1, 8]",
    "sweeps.0.bandwidth_mbps=[200, 900]",
    "sweeps.0.devices=[2]",
)
SMALL_HELD_OUT = (
    "held_out.prompt_tokens=[1536]",
    "held_out.output_tokens=[16]",
    "held_out.batch=[4]",
    "held_out.bandwidth_mbps=[300, 700]",
    "held_out.devices=[2]",
)

pytestmark = pytest.mark.timeout(240)


def hand_decoder_map() -> dict[str, Any]:
    """Single: TTFT 100 ms, TPOT 20 ms; Prism x2: TTFT 60 ms, TPOT 40 ms (prefill splits,
    decode pays the exchange)."""

    def candidate(strategy: str, devices: int, ttft: float, tpot: float) -> dict[str, Any]:
        latency = [
            [[[prompt * ttft / 100 + (out - 1) * tpot]] for out in (10, 30)]
            for prompt in (100, 200)
        ]
        return {
            "strategy": strategy,
            "devices": devices,
            **({"cr": 4.0} if strategy == "prism" else {}),
            "gflops_per_device": 10.0 / devices,
            "bytes_sent": [[[0.0], [0.0]], [[0.0], [0.0]]],
            "latency_ms": latency,
            "energy_j": [[[[v[0][0] / 100 * devices]] for v in plane] for plane in latency],
            "ttft_ms": [[[[prompt * ttft / 100]] for _ in (10, 30)] for prompt in (100, 200)],
            "tpot_ms": [[[[tpot]] for _ in (10, 30)] for _ in (100, 200)],
        }

    return {
        "scenario": "hand",
        "source": "hand",
        "tokens": [100, 200],
        "output_tokens": [10, 30],
        "batches": [1],
        "bandwidths_mbps": [100],
        "candidates": [candidate("single", 1, 100, 20), candidate("prism", 2, 60, 40)],
    }


def test_decoder_map_interpolates_along_output_tokens(tmp_path: Path) -> None:
    perf_map = validate_map(hand_decoder_map(), None)
    assert perf_map.decoder and perf_map.output_tokens == (10, 30)
    single, prism = perf_map.candidates
    on_grid = perf_map.estimate(single, 1, 100, 200, 30)
    assert (on_grid.ttft_ms, on_grid.tpot_ms, on_grid.latency_ms) == (200, 20, 200 + 29 * 20)
    between = perf_map.estimate(prism, 1, 100, 150, 20)  # linear in both token axes
    assert between.ttft_ms == pytest.approx(90)
    assert between.latency_ms == pytest.approx(90 + 19 * 40)
    beyond = perf_map.estimate(prism, 1, 100, 100, 50)  # extrapolated: 40 ms per token
    assert beyond.latency_ms == pytest.approx(60 + 49 * 40)
    path = tmp_path / "map.json"
    write_map(path, perf_map)
    assert read_map(path) == perf_map
    assert json.loads(path.read_text())["output_tokens"] == [10, 30]


def test_the_objective_decides_between_prefill_and_decode() -> None:
    perf_map = validate_map(hand_decoder_map(), None)
    ttft = AdaptivePolicy(perf_map, Objective("ttft"))
    tpot = AdaptivePolicy(perf_map, Objective("tpot"))
    latency = AdaptivePolicy(perf_map, Objective("latency"))
    assert ttft.choose(1, 100, tokens=150, output_tokens=20).label == "prism cr 4 x2"
    assert tpot.choose(1, 100, tokens=150, output_tokens=20).label == "single"
    # whole generation: a long prompt with few tokens to generate favours the split
    # (200 x 0.4 = 80 ms saved in prefill against 20 ms per later token)
    assert latency.choose(1, 100, tokens=200, output_tokens=3).label == "prism cr 4 x2"
    assert latency.choose(1, 100, tokens=200, output_tokens=30).label == "single"
    with pytest.raises(ValueError, match="output tokens"):
        ttft.choose(1, 100, tokens=150)  # the map spans two output lengths
    assert make_policy("always_distributed", perf_map, Objective("ttft")).choose(
        1, 100, tokens=100, output_tokens=10
    ).label == ("prism cr 4 x2")


def test_decoder_objectives_need_a_decoder_map() -> None:
    encoder_map = read_map_from_raw_encoder()
    with pytest.raises(ValueError, match="needs a decoder's map"):
        AdaptivePolicy(encoder_map, Objective("tpot"))
    raw = hand_decoder_map()
    del raw["output_tokens"]  # decoder grids on an encoder's axes
    with pytest.raises(InputError, match=r"does not have the grids of an encoder") as exc:
        validate_map(raw, None)
    assert exc.value.field == "candidates.0"
    raw = hand_decoder_map()
    raw["candidates"][1]["tpot_ms"][0][1][0][0] = "slow"
    with pytest.raises(InputError) as exc:
        validate_map(raw, None)
    assert exc.value.field == "candidates.1.tpot_ms.0.1.0.0"


def read_map_from_raw_encoder() -> Any:
    """An encoder's map: one length, batch and bandwidth, single only."""
    single = {"strategy": "single", "devices": 1, "bytes_sent": [[0]]}
    single |= {"latency_ms": [[[100]]], "energy_j": [[[1]]]}
    raw = {"scenario": "hand", "source": "hand", "tokens": [197], "batches": [1]}
    return validate_map({**raw, "bandwidths_mbps": [100], "candidates": [single]}, None)


@pytest.fixture(scope="module")
def small() -> tuple[Evaluation, Any]:
    """The shipped decoder evaluation on a small grid, objective TTFT."""
    inputs = load_eval_inputs(EVAL, (*SMALL_HELD_OUT, "objective=ttft"))
    scenario = load_scenario(SCENARIO, SMALL_MAP)
    return evaluate(scenario, SCENARIO, inputs.settings), (scenario, inputs.settings)


def test_twin_evaluation_of_a_decoder(small: tuple[Evaluation, Any], tmp_path: Path) -> None:
    result, _ = small
    labels = [c.label for c in result.perf_map.candidates]
    assert labels[0] == "single" and "pipeline x2" in labels and "tensor_parallel x2" in labels
    assert result.perf_map.output_tokens == (8, 24)
    assert len(result.conditions) == 2 and not any(c.in_map for c in result.conditions)
    for c in result.conditions:  # a 1536-token prefill splits best by positions
        assert c.output_tokens == 16 and c.oracle.startswith(("prism", "voltage"))
        assert c.truth[c.oracle].ttft_ms < c.truth["single"].ttft_ms
    assert (
        result.scores["adaptive"].mean_regret_pct < result.scores["always_single"].mean_regret_pct
    )
    write_evaluation(tmp_path, result)
    data = json.loads((tmp_path / "evaluation.json").read_text())
    assert data["objective"] == "ttft" and data["map"]["output_tokens"] == [8, 24]
    assert {"prompt_tokens", "output_tokens"} <= set(data["by_axis"])
    assert "tokens" not in data["by_axis"]
    assert set(data["conditions"][0]["truth"]["single"]) == {
        "latency_ms",
        "energy_j",
        "ttft_ms",
        "tpot_ms",
    }
    assert "16 output tokens" in (tmp_path / "evaluation.html").read_text()


def test_measured_decoder_rows_score_as_the_twin(
    small: tuple[Evaluation, Any], tmp_path: Path
) -> None:
    """The twin's own rows, written as a results table with the decoder columns, are a
    measured ground truth (truth_table) and a map (map_table) that give the same scores."""
    result, (scenario, settings) = small
    held_out = settings.held_out
    truth_csv = tmp_path / "truth.csv"
    write_results(truth_csv, decoder_rows(decoder_runs(scenario, held_out.sweep()), SCENARIO))
    rows = median_per_configuration(read_measured(truth_csv, truth_csv, 0))
    map_csv = tmp_path / "map.csv"
    write_results(map_csv, decoder_rows([scenario], SCENARIO))
    table_map = map_from_table(map_csv, 0)
    assert table_map.output_tokens == result.perf_map.output_tokens
    assert [c.label for c in table_map.candidates] == [c.label for c in result.perf_map.candidates]
    measured = evaluate(
        scenario,
        SCENARIO,
        settings.model_copy(update={"held_out": None, "truth_table": truth_csv.name}),
        map_csv,
        truth_rows=rows,
        truth_table=truth_csv,
    )
    assert measured.truth_source == "table truth.csv"
    assert [c.oracle for c in measured.conditions] == [c.oracle for c in result.conditions]
    assert measured.scores["adaptive"] == result.scores["adaptive"]


def test_bad_decoder_evaluation_files() -> None:
    with pytest.raises(InputError, match="prompt_tokens are the map's") as exc:
        load_eval_inputs(EVAL, ("map_tokens=[128]",))
    assert exc.value.field == "map_tokens"
    with pytest.raises(InputError) as exc:
        load_eval_inputs(EVAL, ("held_out.tokens=[128]",))
    assert exc.value.field == "held_out.tokens"
    with pytest.raises(InputError, match="decoder's objective") as exc:
        load_eval_inputs(ENCODER_EVAL, ("objective=ttft",))
    assert exc.value.field == "objective"
    with pytest.raises(InputError) as exc:
        load_eval_inputs(ENCODER_EVAL, ("held_out.prompt_tokens=[128]",))
    assert exc.value.field == "held_out.prompt_tokens"
    with pytest.raises(InputError) as exc:
        load_eval_inputs(EVAL, ("objective=speed",))
    assert exc.value.field == "objective"


def test_a_tpot_of_one_output_token_is_said_so(tmp_path: Path) -> None:
    """One output token has no time per later token (TPOT 0 everywhere): the error blamed
    a missing power meter and named the scenario's 'devices'."""
    (tmp_path / "llm.yaml").write_text((REPO / "scenarios" / "llm_smoke.yaml").read_text())
    held_out = "held_out: {batch: [3], bandwidth_mbps: [300], devices: [2], output_tokens: [1]}"
    path = tmp_path / "e.eval.yaml"
    path.write_text(f"scenario: llm.yaml\nobjective: tpot\n{held_out}\n")
    with pytest.raises(InputError, match="a TPOT needs 2 or more output tokens") as exc:
        evaluate_adaptive(path)
    assert (exc.value.path, exc.value.field) == (str(path), "held_out.output_tokens")
    assert "power meter" not in exc.value.problem


def test_edgetwin_evaluate_takes_a_decoder_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI on the small shipped decoder (one prompt and output length in its map)."""
    (tmp_path / "llm.yaml").write_text((REPO / "scenarios" / "llm_smoke.yaml").read_text())
    held_out = "held_out: {batch: [3], bandwidth_mbps: [300], devices: [2]}\n"
    (tmp_path / "e.eval.yaml").write_text(f"scenario: llm.yaml\nobjective: tpot\n{held_out}")
    out = tmp_path / "out"
    assert main(["evaluate", str(tmp_path / "e.eval.yaml"), "--out", str(out), "--quiet"]) == 0
    assert "ground truth: twin, 1 condition\n" in capsys.readouterr().out  # was "1 conditions"
    data = json.loads((out / "evaluation.json").read_text())
    assert data["map"]["tokens"] == [64] and data["map"]["output_tokens"] == [16]
    assert data["conditions"][0]["output_tokens"] == 16  # the workload's, as in the map
    assert read_map(out / "performance_map.json").decoder
