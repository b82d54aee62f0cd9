"""Evaluating the selection policies against the twin at held-out conditions."""

from __future__ import annotations

import json
import math
from html import escape
from pathlib import Path
from typing import Any

import pytest
import yaml

from edgetwin import evaluate_adaptive, init
from edgetwin.errors import InputError
from edgetwin.evaluate.adaptive import evaluate
from edgetwin.evaluate.adaptive_checks import unread_weight
from edgetwin.evaluate.adaptive_inputs import load_eval_inputs
from edgetwin.evaluate.adaptive_results import Evaluation
from edgetwin.evaluate.adaptive_scores import Choice, ConditionResult, regret_pct, score_policy
from edgetwin.evaluate.profiling import rows_at_tokens
from edgetwin.models.registry import candidate_label
from edgetwin.network_spec import BandwidthStep
from edgetwin.policies.perf_map import Estimate
from edgetwin.reports.adaptive import write_evaluation
from edgetwin.results import write_results
from edgetwin.scenario import load_scenario
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.runner import run_scenario
from edgetwin.sweep_points import configurations
from tests.conftest import SavedEvaluation

REPO = Path(__file__).resolve().parents[1]
EVAL = REPO / "scenarios" / "adaptive_prism.eval.yaml"
TOKENS_EVAL = REPO / "scenarios" / "adaptive_tokens.eval.yaml"
DEVICES_EVAL = REPO / "scenarios" / "adaptive_devices.eval.yaml"
LLM_EVAL = REPO / "scenarios" / "adaptive_llm.eval.yaml"
HUGE = 10**15  # an extra few zeros


@pytest.fixture(scope="module")
def evaluation() -> Evaluation:
    inputs = load_eval_inputs(EVAL)
    return evaluate(inputs.scenario, inputs.scenario_path, inputs.settings, inputs.map_table)


def test_acceptance_on_the_shipped_scenario(evaluation: Evaluation) -> None:
    """Map at 200-800 Mbit/s; held out at 300, 500, 700, 900 Mbit/s (900: outside the map)."""
    assert evaluation.perf_map.bandwidths_mbps == (200, 400, 600, 800)
    assert {c.bandwidth_mbps for c in evaluation.conditions} == {300, 500, 700, 900}
    assert any(c.batch not in evaluation.perf_map.batches for c in evaluation.conditions)
    adaptive = evaluation.scores["adaptive"]
    assert adaptive.decision_accuracy >= 0.95
    assert adaptive.mean_regret_pct < 2
    for baseline in ("always_single", "always_distributed", "flop_heuristic"):
        assert evaluation.scores[baseline].mean_regret_pct > adaptive.mean_regret_pct


def test_crossover_batch_per_bandwidth(evaluation: Evaluation) -> None:
    rows = evaluation.crossover_batch()
    assert [r["bandwidth_mbps"] for r in rows] == [300, 500, 700, 900]
    for row in rows:
        assert row["always_single"] is None
        assert row["always_distributed"] == 1
        best = [c for c in evaluation.conditions if c.bandwidth_mbps == row["bandwidth_mbps"]]
        first = min(c.batch for c in best if c.oracle != "single")
        assert row["oracle"] == first
        assert all(c.oracle == "single" for c in best if c.batch < first)


def _condition(batch: int, costs: dict[str, float], picks: dict[str, str]) -> ConditionResult:
    oracle = min(costs, key=costs.__getitem__)
    truth = {label: Estimate(latency_ms=cost, energy_j=1.0) for label, cost in costs.items()}
    choices = {
        name: Choice(label, costs[label], regret_pct(costs[label], costs[oracle]))
        for name, label in picks.items()
    }
    best = Choice(oracle, costs[oracle], 0.0)
    return ConditionResult(batch, 400, 2, 197, False, truth, oracle, costs[oracle], choices, best)


def test_regret_on_a_hand_example() -> None:
    conditions = [
        _condition(1, {"single": 100, "prism cr 9.9 x2": 150}, {"p": "single"}),
        _condition(8, {"single": 500, "prism cr 9.9 x2": 400}, {"p": "single"}),
        _condition(16, {"single": 1000, "prism cr 9.9 x2": 800}, {"p": "prism cr 9.9 x2"}),
    ]
    score = score_policy("p", conditions)
    assert score.decision_accuracy == pytest.approx(2 / 3)
    assert score.mode_accuracy == pytest.approx(2 / 3)
    assert score.max_regret_pct == pytest.approx(25.0)  # 500 vs 400
    assert score.mean_regret_pct == pytest.approx(25.0 / 3)
    assert score.confusion == {
        "single": {"single": 1},
        "prism cr 9.9 x2": {"single": 1, "prism cr 9.9 x2": 1},
    }


def test_write_evaluation_is_deterministic(tmp_path: Path, evaluation: Evaluation) -> None:
    inputs = load_eval_inputs(EVAL)
    again = evaluate(inputs.scenario, inputs.scenario_path, inputs.settings)
    first = write_evaluation(tmp_path / "a", evaluation)
    second = write_evaluation(tmp_path / "b", again)
    for a, b in zip(first, second, strict=True):
        if a.suffix == ".json":  # the page differs only in plotly's random element ids
            assert a.read_bytes() == b.read_bytes()
    data = json.loads((tmp_path / "a" / "evaluation.json").read_text())
    for key in ("decision_accuracy", "mean_regret_pct", "max_regret_pct"):
        assert data[key] == data["policies"]["adaptive"][key]
        assert all(key in policy for policy in data["policies"].values())
    html = (tmp_path / "a" / "evaluation.html").read_text()
    assert "Best mode vs chosen" in html and "Crossover batch" in html
    assert "<script src=" not in html  # self-contained


def test_objective_from_overrides() -> None:
    inputs = load_eval_inputs(EVAL, ("objective=energy",))
    result = evaluate(inputs.scenario, inputs.scenario_path, inputs.settings)
    assert all(c.oracle == "single" for c in result.conditions)
    assert result.scores["always_single"].decision_accuracy == 1.0


def test_bad_evaluation_files(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        load_eval_inputs(EVAL, ("policies=[adaptive, psychic]",))
    assert exc.value.field == "policies"
    assert "psychic" in exc.value.problem
    with pytest.raises(InputError, match="policy 'always_single' is given twice") as exc:
        load_eval_inputs(EVAL, ("policies=[adaptive, always_single, always_single]",))
    assert exc.value.field == "policies"
    with pytest.raises(InputError, match="1 is given twice") as exc:  # was scored twice
        load_eval_inputs(EVAL, ("held_out.batch=[1, 8, 1]",))
    assert exc.value.field == "held_out.batch"
    with pytest.raises(InputError) as exc:
        load_eval_inputs(EVAL, ("weight=2",))
    assert exc.value.field == "weight"
    # more devices up than the scenario's fleet has cannot be run in the twin
    with pytest.raises(InputError, match=r"3 devices up, but adaptive_prism\.yaml has 2") as exc:
        load_eval_inputs(EVAL, ("held_out.devices=[2, 3]",))
    assert (exc.value.path, exc.value.field) == (str(EVAL), "held_out.devices")
    path = tmp_path / "eval.yaml"
    path.write_text("scenario: missing.yaml\nheld_out: {batch: [1]}\n")
    with pytest.raises(InputError, match="file not found") as exc:
        load_eval_inputs(path)
    assert (exc.value.path, exc.value.field) == (str(path), "scenario")
    # a plan question as the scenario: said so (it was 'strategies': required key is missing)
    plan = REPO / "scenarios" / "plan_fleet.plan.yaml"
    path.write_text(f"scenario: {plan}\nheld_out: {{batch: [1]}}\n")
    with pytest.raises(InputError, match=r"plan_fleet\.plan\.yaml is a plan question") as exc:
        load_eval_inputs(path)
    assert (exc.value.path, exc.value.field) == (str(path), "scenario")


@pytest.mark.parametrize("field", ["map_tokens", "held_out.tokens"])
def test_a_sequence_length_a_split_cannot_share_is_refused(field: str) -> None:
    """1 token over Voltage's 2 devices was a ValueError traceback from the twin's layout
    (the scenario's own check saw its model's 197 tokens only)."""
    with pytest.raises(InputError, match="voltage: 1 token cannot be split over 2") as exc:
        load_eval_inputs(EVAL, (f"{field}=[197, 1]",))
    assert (exc.value.path, exc.value.field) == (str(EVAL), f"{field}.1")


@pytest.mark.parametrize("field", ["map_tokens", "held_out.tokens"])
def test_an_empty_token_list_is_refused_not_read_as_the_default(field: str) -> None:
    """``[]`` silently meant "the model's own tokens", as leaving the list out does; given,
    a list of sequence lengths holds at least one (as a sweep's lists do)."""
    with pytest.raises(InputError) as exc:
        load_eval_inputs(EVAL, (f"{field}=[]",))
    assert exc.value.field == field


@pytest.mark.parametrize(
    ("spec", "item", "field", "expect"),
    [
        (
            DEVICES_EVAL,
            f"held_out.devices=[2, {HUGE}]",
            "held_out.devices.1",
            "or equal to 1,024, not 1e\\+15",
        ),
        (
            TOKENS_EVAL,
            f"map_tokens=[101, {HUGE}]",
            "map_tokens.1",
            "or equal to 16,777,216, not 1e\\+15",
        ),
        (
            TOKENS_EVAL,
            f"held_out.tokens=[{HUGE}]",
            "held_out.tokens.0",
            "or equal to 16,777,216, not 1e\\+15",
        ),
        (LLM_EVAL, f"held_out.prompt_tokens=[{HUGE}]", "held_out", "the model.s 131,072"),
        (LLM_EVAL, f"held_out.output_tokens=[{HUGE}]", "held_out", "the model.s 131,072"),
    ],
    ids=["devices", "map_tokens", "held_out_tokens", "prompt_tokens", "output_tokens"],
)
def test_a_held_out_size_past_what_runs_is_refused(
    spec: Path, item: str, field: str, expect: str
) -> None:
    """Each was refused only once running, or never: devices up made a tuple of every count
    up to it (a MemoryError traceback), 10^15 tokens filled memory with the layouts' rows
    until one, and 10^15 output tokens (the scenario checks its own sweeps' against the
    model's positions, not the evaluation's) generated until killed."""
    with pytest.raises(InputError, match=expect) as exc:
        load_eval_inputs(spec, (item,))
    assert (exc.value.path, exc.value.field) == (str(spec), field)


def test_held_out_sequence_lengths_per_axis(tmp_path: Path) -> None:
    """A map at 101 and 325 tokens; held out at 65, 197 (between) and 401 (beyond)."""
    overrides = (
        "map_tokens=[101, 325]",
        "held_out.tokens=[65, 197, 401]",
        "held_out.batch=[2, 3, 6, 12]",
        "held_out.bandwidth_mbps=[300, 700]",
    )
    inputs = load_eval_inputs(TOKENS_EVAL, overrides)
    result = evaluate(inputs.scenario, inputs.scenario_path, inputs.settings)
    assert result.perf_map.tokens == (101, 325)
    assert len(result.conditions) == 3 * 4 * 2 and not any(c.in_map for c in result.conditions)
    # the best mode depends on the sequence length at some held-out batch and bandwidth
    by_tokens = {
        (c.batch, c.bandwidth_mbps): {
            d.oracle
            for d in result.conditions
            if d.batch == c.batch and d.bandwidth_mbps == c.bandwidth_mbps
        }
        for c in result.conditions
    }
    assert any(len(oracles) > 1 for oracles in by_tokens.values())
    adaptive = result.scores["adaptive"]
    assert adaptive.decision_accuracy >= 0.9 and adaptive.mean_regret_pct < 2
    for baseline in ("always_single", "always_distributed"):
        assert result.scores[baseline].mean_regret_pct > adaptive.mean_regret_pct
    tokens = result.by_axis("adaptive")["tokens"]
    assert [(t["tokens"], t["in_map"], t["conditions"]) for t in tokens] == [
        (65, False, 8),
        (197, False, 8),
        (401, False, 8),
    ]
    batches = {b["batch"]: b["in_map"] for b in result.by_axis("adaptive")["batch"]}
    assert batches == {2: True, 3: False, 6: False, 12: False}
    write_evaluation(tmp_path, result)
    data = json.loads((tmp_path / "evaluation.json").read_text())
    assert data["map"]["tokens"] == [101, 325] and data["by_axis"]["tokens"] == tokens
    assert {row["tokens"] for row in data["crossover_batch"]} == {65, 197, 401}
    assert "per axis value" in (tmp_path / "evaluation.html").read_text()


def test_three_up_on_a_two_device_map(tmp_path: Path) -> None:
    """Formerly refused ("no candidate on 3 devices"): with three boards up the policy now
    deploys on two of them, and the oracle may use all three."""
    scenario = (REPO / "scenarios" / "adaptive_prism.yaml").read_text()
    (tmp_path / "three.yaml").write_text(scenario.replace("count: 2", "count: 3"))
    path = tmp_path / "three.eval.yaml"
    path.write_text("scenario: three.yaml\nheld_out: {batch: [8, 32], devices: [3]}\n")
    inputs = load_eval_inputs(path)
    result = evaluate(inputs.scenario, inputs.scenario_path, inputs.settings)
    for c in result.conditions:
        assert {_devices(label) for label in c.truth} == {1, 2, 3}
        assert all(_devices(choice.label) <= 2 for choice in c.choices.values())


def _devices(label: str) -> int:
    """Devices of a candidate label (``single``, ``prism cr 9.9 x3``)."""
    return 1 if label == "single" else int(label.rsplit("x", 1)[1])


def _twin_latency_ms(overrides: list[str]) -> dict[tuple[int, float, str], float]:
    """The adaptive_devices scenario run directly in the twin: (batch, bw, label) -> ms."""
    path = REPO / "scenarios" / "adaptive_devices.yaml"
    scenario = load_scenario(path, overrides)
    outcomes = run_scenario(scenario, build_fleet(scenario, path))
    return {  # a candidate is named by the CR requested (the row's cr is the one used)
        (o.row.batch, o.row.bandwidth_mbps, candidate_label(o.row.strategy, o.row.devices, cr)): (
            o.row.total_ms
        )
        for o in outcomes
        for cr in [o.config.cr if o.config.cr is not None else o.row.cr]
    }


def test_the_oracle_at_n_up_is_the_best_run_on_at_most_n_devices() -> None:
    held_out = {"batch": [2, 8, 32], "bandwidth_mbps": [300, 900], "devices": [2, 3, 5]}
    overrides = tuple(f"held_out.{k}={v}" for k, v in held_out.items())
    inputs = load_eval_inputs(DEVICES_EVAL, overrides)
    result = evaluate(inputs.scenario, inputs.scenario_path, inputs.settings)
    sweep = [f"sweeps.0.{k}={v}" for k, v in held_out.items() if k != "devices"]
    twin = _twin_latency_ms([*sweep, "sweeps.0.devices=[2, 3, 4, 5]"])
    oracle_ms = {}
    for c in result.conditions:
        runnable = {
            label: ms
            for (batch, bw, label), ms in twin.items()
            if (batch, bw) == (c.batch, c.bandwidth_mbps) and _devices(label) <= c.devices
        }
        assert set(c.truth) == set(runnable)
        assert c.oracle_cost == min(runnable.values())
        oracle_ms[(c.batch, c.bandwidth_mbps, c.devices)] = c.oracle_cost
        for choice in c.choices.values():  # every pick fits on the devices up, and was profiled
            assert _devices(choice.label) <= c.devices and _devices(choice.label) != 3
        assert c.best_in_map.regret_pct <= c.choices["adaptive"].regret_pct
    for (batch, bw, up), ms in oracle_ms.items():  # more devices up never hurts the oracle
        assert all(ms <= oracle_ms[(batch, bw, fewer)] for fewer in (2, 3) if fewer < up)
    # with 3 up the best is sometimes on all three, which the map (2 and 4) cannot pick
    three = [c for c in result.conditions if c.devices == 3]
    assert any(c.oracle.endswith("x3") for c in three)
    assert all(_devices(c.choices["adaptive"].label) <= 2 for c in three)


def test_shipped_devices_evaluation_scores_each_device_count(
    adaptive_devices_evaluation: SavedEvaluation,
) -> None:
    """The session's evaluation of the shipped file (tests/test_report_figures.py checks
    its page's figures)."""
    result = adaptive_devices_evaluation.evaluation
    assert result.perf_map.devices == (1, 2, 4)
    devices = result.by_axis("adaptive")["devices"]
    assert [(d["devices"], d["in_map"], d["conditions"]) for d in devices] == [
        (2, True, 40),
        (3, False, 40),
        (4, True, 40),
        (5, False, 40),
    ]
    for row in devices:  # the map's gap is a floor under the policy's regret
        assert row["map_gap_mean_pct"] <= row["mean_regret_pct"]
    adaptive = result.scores["adaptive"]
    for baseline in ("always_single", "always_distributed", "flop_heuristic"):
        assert result.scores[baseline].mean_regret_pct > adaptive.mean_regret_pct
    out = adaptive_devices_evaluation.folder
    data = json.loads((out / "evaluation.json").read_text())
    assert data["map"]["devices"] == [1, 2, 4] and data["by_axis"]["devices"] == devices
    assert "P9.9x3" in (out / "evaluation.html").read_text()  # an unprofiled best


def test_an_evaluation_warns_that_its_twin_sweeps_drop_no_packets(evaluation: Evaluation) -> None:
    """A scenario's ``loss_pct`` is played only by the emulator: the twin's map and held-out
    runs carry a warning (the CLI prints it), and their scores are those without loss."""
    assert evaluation.warnings == ()
    inputs = load_eval_inputs(EVAL)
    lossy_network = inputs.scenario.network.model_copy(update={"loss_pct": 2.0})
    lossy = inputs.scenario.model_copy(update={"network": lossy_network})
    result = evaluate(lossy, inputs.scenario_path, inputs.settings)
    assert result.warnings == (
        "network.loss_pct is 2 %, but only --mode emu (mode='emu' in Python) drops packets: "
        "a twin run has no loss",
    )
    assert result.scores == evaluation.scores


def test_an_evaluation_warns_of_a_schedule_step_its_runs_ended_before(
    evaluation: Evaluation, tmp_path: Path
) -> None:
    """Every map and held-out run ends within a second, before a step at 1000 s: edgetwin
    run and plan said so, evaluate did not. The step never plays, so the scores are those
    without it; a map read from a table counts the held-out runs alone."""
    inputs = load_eval_inputs(EVAL)
    scenario, settings = inputs.scenario, inputs.settings
    step = BandwidthStep(at_ms=1e6, bandwidth_mbps=5)
    late = scenario.model_copy(
        update={"network": scenario.network.model_copy(update={"schedule": (step,)})}
    )
    held_out = late.model_copy(update={"sweeps": (settings.held_out.sweep(),)})
    map_runs, held_out_runs = (len(configurations(s)) * s.repetitions for s in (late, held_out))
    result = evaluate(late, inputs.scenario_path, settings)
    runs = map_runs + held_out_runs
    assert result.warnings == (_late_warning(f"{runs} of {runs} map and held-out runs"),)
    assert result.scores == evaluation.scores
    table = tmp_path / "map.csv"
    write_results(table, rows_at_tokens(scenario, inputs.scenario_path, scenario.sweeps[0], ()))
    from_table = evaluate(late, inputs.scenario_path, settings, table)
    counted = f"{held_out_runs} of {held_out_runs} held-out runs"
    assert from_table.warnings == (_late_warning(counted),)


def test_an_evaluations_warnings_are_kept_in_its_folder_and_shown_on_its_page(
    tmp_path: Path,
) -> None:
    """adaptive_prism with a step at 1000 s that no run reaches: evaluate printed the
    warning and returned it, but its folder kept none of it and its page had no warning."""
    scenario = yaml.safe_load((REPO / "scenarios" / "adaptive_prism.yaml").read_text())
    scenario["network"]["schedule"] = [{"at_ms": 1e6, "bandwidth_mbps": 5}]
    scenario["sweeps"] = [{"batch": [1, 8], "bandwidth_mbps": [400], "devices": [2]}]
    (tmp_path / "late.yaml").write_text(yaml.safe_dump(scenario))
    spec = yaml.safe_load(EVAL.read_text())
    spec.update(
        scenario="late.yaml", held_out={"batch": [4], "bandwidth_mbps": [400], "devices": [2]}
    )
    (tmp_path / "late.eval.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    result = evaluate_adaptive(tmp_path / "late.eval.yaml", out=out)
    (warning,) = result.warnings
    # 5 candidates (single, voltage, prism at 3 CRs) at 2 map batches and 1 held-out batch
    assert warning == _late_warning("15 of 15 map and held-out runs")
    assert json.loads((out / "warnings.json").read_text()) == [warning]
    page = (out / "evaluation.html").read_text()
    assert page.count(f"<p class='warning'><b>Warning:</b> {escape(warning)}</p>") == 1
    quiet = evaluate_adaptive(EVAL, overrides=["held_out.batch=[4]"], out=tmp_path / "quiet")
    assert quiet.warnings == () and not (tmp_path / "quiet" / "warnings.json").exists()
    assert "<b>Warning:</b>" not in (tmp_path / "quiet" / "evaluation.html").read_text()


def _late_warning(missed: str) -> str:
    return (
        f"network.schedule step to 5 Mbps at 1,000 s did not play in {missed}: each ended "
        "before it (times count from each run's start)"
    )


def test_a_weight_that_the_objective_does_not_read_is_warned() -> None:
    """weight was taken without a word whatever the objective: only weighted reads it."""
    result = evaluate_adaptive(EVAL, overrides=["weight=0.3"])
    unread = f"{EVAL}: field 'weight': 0.3 is read by objective weighted only: latency ignores it"
    assert unread in result.warnings
    weighted = evaluate_adaptive(EVAL, overrides=["weight=0.3", "objective=weighted"])
    assert not any("'weight'" in warning for warning in weighted.warnings)


def test_no_shipped_evaluation_nor_init_template_gives_a_weight_it_does_not_read(
    tmp_path: Path,
) -> None:
    init("scenario", tmp_path)
    shipped = sorted((REPO / "scenarios").glob("adaptive_*.eval.yaml"))
    for spec in (*shipped, init("eval", tmp_path)):
        assert unread_weight(load_eval_inputs(spec).settings, spec) == [], spec


def _boards_with_ram(tmp_path: Path, ram_mb: int) -> Path:
    """adaptive_prism on boards of ``ram_mb``, held out at batch 1 and 32 over 500 Mbit/s.
    560 MB hold ViT-B/16's weights and one device's forward at batch 24 (532 MB), not at
    32 (595 MB); Prism cr 9.9 on 2 boards holds 504 MB at batch 32 (docs/twin.md's RAM)."""
    scenario = (REPO / "scenarios" / "adaptive_prism.yaml").read_text()
    (tmp_path / "small.yaml").write_text(
        scenario.replace("count: 2", f"count: 2\n    ram_mb: {ram_mb}")
    )
    path = tmp_path / "small.eval.yaml"
    path.write_text(
        "scenario: small.yaml\nheld_out: {batch: [1, 32], bandwidth_mbps: [500], devices: [2]}\n"
    )
    return path


def test_a_condition_where_every_candidate_runs_out_of_memory_is_not_scored(
    tmp_path: Path,
) -> None:
    """Formerly scored as a correct pick with no regret; and always_distributed divided by
    single's infinite cost on the map's grid (a math domain error)."""
    inputs = load_eval_inputs(_boards_with_ram(tmp_path, 400))
    result = evaluate(inputs.scenario, inputs.scenario_path, inputs.settings)
    assert [c.batch for c in result.conditions] == [1]
    assert [key[0] for key in result.infeasible] == [32]
    assert result.to_json()["conditions_infeasible"] == 1
    assert set(result.scores) == set(inputs.settings.policies)


def _strict_json(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_an_infinite_regret_is_null_in_evaluation_json(tmp_path: Path) -> None:
    """Single runs out of memory at batch 32 on these boards, Prism does not:
    always_single's regret there is infinite, and evaluation.json said Infinity, which is
    not JSON (jq, JSON.parse and strict readers refuse the file)."""
    path = _boards_with_ram(tmp_path, 560)
    path.write_text(path.read_text().replace("[1, 32]", "[16, 24, 32]"))
    result = evaluate_adaptive(path, out=tmp_path / "out")
    assert result.scores["always_single"].max_regret_pct == math.inf
    data = _strict_json((tmp_path / "out" / "evaluation.json").read_text())
    assert data["policies"]["always_single"]["max_regret_pct"] is None
    assert data["policies"]["adaptive"]["max_regret_pct"] == 0.0
    picks = [c["choices"]["always_single"]["regret_pct"] for c in data["conditions"]]
    assert picks[0] is not None and picks[-1] is None  # batch 16 ran, 32 did not


def test_weighted_where_single_runs_out_of_memory_is_refused(tmp_path: Path) -> None:
    """Weighted ranks by ratios to single's latency and energy: where single runs out of
    memory and Prism runs (batch 32 on these boards) every cost was inf, and the condition
    was dropped as one where every candidate fails (all of them: the evaluation said so)."""
    path = _boards_with_ram(tmp_path, 560)
    path.write_text(path.read_text().replace("[1, 32]", "[16, 32]") + "objective: weighted\n")
    with pytest.raises(InputError, match="single fails at batch 32, 500 Mbit/s") as exc:
        evaluate_adaptive(path)
    assert (exc.value.path, exc.value.field) == (str(path), "held_out")
    assert "objective weighted is relative to single's latency and energy" in str(exc.value)
    path.write_text(path.read_text().replace("[16, 32]", "[16]"))  # single runs: scored
    assert evaluate_adaptive(path).conditions[0].batch == 16


def test_every_condition_out_of_memory_is_refused(tmp_path: Path) -> None:
    """It named the scenario and no field; the conditions are the evaluation's held_out."""
    path = _boards_with_ram(tmp_path, 300)
    inputs = load_eval_inputs(path)
    with pytest.raises(InputError, match="every candidate fails at every held-out condition"):
        evaluate(inputs.scenario, inputs.scenario_path, inputs.settings)
    with pytest.raises(InputError, match="every candidate fails at every held-out") as exc:
        evaluate_adaptive(path)
    assert (exc.value.path, exc.value.field) == (str(path), "held_out")


def test_a_policy_the_map_cannot_serve_names_the_evaluation_file(tmp_path: Path) -> None:
    """always_distributed on a scenario that runs single alone: the line named neither
    file, only 'policies'."""
    scenario = yaml.safe_load((REPO / "scenarios" / "adaptive_prism.yaml").read_text())
    scenario["strategies"] = [{"name": "single"}]
    (tmp_path / "single.yaml").write_text(yaml.safe_dump(scenario))
    path = tmp_path / "single.eval.yaml"
    path.write_text("scenario: single.yaml\nheld_out: {batch: [8], bandwidth_mbps: [500]}\n")
    with pytest.raises(InputError, match="always_distributed: the map has no distributed") as exc:
        evaluate_adaptive(path)
    assert (exc.value.path, exc.value.field) == (str(path), "policies")
