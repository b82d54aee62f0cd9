"""Plan questions on a decoder: the lowest TTFT / TPOT per cell follow from the twin's rows,
and the longest context that fits from the memory arithmetic (docs/llm.md, Memory)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from edgetwin.decoder_spec import DTYPE_BYTES, DecoderSpec, kept_positions, kv_bytes_per_token
from edgetwin.errors import InputError
from edgetwin.models import registry
from edgetwin.plan.answer_text import describe
from edgetwin.plan.executors import SerialExecutor
from edgetwin.plan.question_file import load_question
from edgetwin.plan.run import run_plan
from edgetwin.plan.sweep import memory_edge_configs
from edgetwin.profile import MB
from edgetwin.reports.plan import questions_figures, write_plan_report
from edgetwin.scenario import load_scenario
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.runner import decoder_memory_status, run_scenario
from edgetwin.sweep_points import configurations
from tests.conftest import REPO

SCENARIO = REPO / "scenarios" / "llm_jetson.yaml"
OUTPUT_TOKENS = 4


def llm_question(tmp_path: Path, **changes: Any) -> Path:
    raw: dict[str, Any] = {
        "name": "q_llm",
        "scenario": str(SCENARIO),
        "set": [f"workload.output_tokens={OUTPUT_TOKENS}"],
        "axes": {
            "batch": [8],
            "bandwidth_mbps": [200, 900],
            "devices": [2],
            "prompt_tokens": [128],
        },
        "question": [
            {"kind": "best_mode", "metrics": ["ttft_ms", "tpot_ms"]},
            {"kind": "longest_context"},
        ],
    }
    raw.update(changes)
    path = tmp_path / "q_llm.plan.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any], Path]:
    tmp = tmp_path_factory.mktemp("plan_llm")
    loaded = load_question(llm_question(tmp))
    outcome = run_plan(loaded, tmp / "out", SerialExecutor(), write_plan_report)
    return loaded, outcome.answer, tmp / "out"


@pytest.mark.timeout(240)
def test_lowest_ttft_and_tpot_follow_from_the_twin_rows(planned: Any) -> None:
    loaded, answer, _ = planned
    best = next(a for a in answer["answers"] if a["kind"] == "best_mode")
    fleet = build_fleet(loaded.scenario, loaded.scenario_path)
    rows = [o.row for o in run_scenario(loaded.scenario, fleet)]
    assert {g["metric"] for g in best["grids"]} == {"ttft_ms", "tpot_ms"}
    for grid in best["grids"]:
        for b, batch in enumerate(best["batches"]):
            for w, bw in enumerate(best["bandwidths_mbps"]):
                cell = [r for r in rows if (r.batch, r.bandwidth_mbps) == (batch, bw)]
                scored = {
                    registry.candidate_label(r.strategy, r.devices, r.cr, r.segments): float(
                        np.mean(getattr(r, grid["metric"]))
                    )
                    for r in cell
                }
                winner = min(scored, key=lambda name: scored[name])
                assert grid["best"][b][w] == winner
                assert grid["best_value"][b][w] == pytest.approx(scored[winner])
    ttft = next(g for g in best["grids"] if g["metric"] == "ttft_ms")
    tpot = next(g for g in best["grids"] if g["metric"] == "tpot_ms")
    assert ttft["best"] != tpot["best"]  # prefill and decode favour different splits here


@pytest.mark.timeout(240)
def test_a_pareto_front_per_prompt_length_of_runs_that_were_made(tmp_path: Path) -> None:
    """The front mixed prompt lengths: a point was the mean of a 128- and a 2048-token run."""
    axes = {"batch": [1], "bandwidth_mbps": [900], "devices": [2], "prompt_tokens": [128, 512]}
    question = llm_question(tmp_path, axes=axes, question={"kind": "best_mode"})
    outcome = run_plan(
        load_question(question), tmp_path / "out", SerialExecutor(), write_plan_report
    )
    front = outcome.answer["pareto"]
    assert {p["prompt_tokens"] for p in front} == {128, 512}
    for point in front:
        (run,) = (
            r
            for r in outcome.rows
            if registry.candidate_label(r.strategy, r.devices, r.cr, r.segments)
            == point["candidate"]
            and (r.batch, r.prompt_tokens) == (point["batch"], point["prompt_tokens"])
        )
        assert point["latency_ms"] == pytest.approx(run.total_ms)
        assert point["energy_j_per_sample"] == pytest.approx(run.energy_j / run.batch)
    fronts = [line for line in describe(outcome.answer) if line.startswith("Pareto front")]
    assert [line.split(", ")[1] for line in fronts] == ["prompt 128", "prompt 512"]


@pytest.mark.timeout(240)
def test_longest_context_is_the_memory_arithmetic(planned: Any) -> None:
    loaded, answer, out = planned
    longest = next(a for a in answer["answers"] if a["kind"] == "longest_context")
    model = loaded.scenario.model
    assert isinstance(model, DecoderSpec)
    ram_mb = build_fleet(loaded.scenario, loaded.scenario_path)[0].profile.ram_mb
    by_candidate = {e["candidate"]: e for e in longest["candidates"]}
    # one board, and tensor parallel (every rank holds a P-th of the heads and the FFN
    # columns of every layer): the whole KV cache, T + O - 1 positions (the real code
    # allocates it before the prefill), and the prefill's activations at the FFN
    # (docs/llm.md's Memory: 5 hidden rows of D, tensor parallel's summed output a sixth;
    # the attention's output; the T x T mask; silu(gate), up and their product) fill the
    # free RAM first, before a decode step's
    width, ffn, batch, a = model.width, model.ffn_size, 8, DTYPE_BYTES["fp16"]
    for label, share, hidden in (("single", 1, 5), ("tensor_parallel x2", 2, 6)):
        entry = by_candidate[label]
        free = (ram_mb - entry["weights_mb"]) * MB

        output = entry["output_tokens"]

        def prefill(
            t: int, share: int = share, hidden: int = hidden, output: int = output
        ) -> float:
            rows, kept = batch * t, kept_positions(t, output)
            activations = (hidden + 1 / share) * rows * width + 3 * rows * ffn / share + t * t
            return batch * kept * kv_bytes_per_token(model) / share + a * activations

        fits = entry["longest_prompt_tokens"]
        assert prefill(fits) <= free < prefill(fits + 1)
        assert entry["stopped_by"] == "out of memory on jetson-0 (prefill)"
    assert kv_bytes_per_token(model) == 2 * 16 * 512 * DTYPE_BYTES["fp16"]
    # every candidate: its longest prompt fits, one more does not (the twin's own check),
    # and a split over two boards holds a longer context than one board
    fleet = build_fleet(loaded.scenario, loaded.scenario_path)
    rows = (out / "results.csv").read_text().splitlines()
    configs = configurations(loaded.scenario)
    for entry in longest["candidates"]:
        if entry["candidate"] != "single":
            assert entry["longest_prompt_tokens"] > by_candidate["single"]["longest_prompt_tokens"]
        config = next(
            c for c in configs if (c.strategy, c.devices) == (entry["strategy"], entry["devices"])
        )
        fits = config.model_copy(update={"prompt_tokens": entry["longest_prompt_tokens"]})
        more = fits.model_copy(update={"prompt_tokens": entry["longest_prompt_tokens"] + 1})
        assert decoder_memory_status(loaded.scenario, fleet, fits) == "ok"
        assert decoder_memory_status(loaded.scenario, fleet, more) == entry["stopped_by"]
    assert len(rows) == 1 + 5 * 2 + 2 * 5  # the grid, then each search's two edge rows


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("strategy", "label"), [({"segments": [4]}, "prism L4 x2"), ({"cr": [4]}, "prism cr 4 x2")]
)
def test_longest_context_keeps_a_prism_candidate_whole(
    tmp_path: Path, strategy: dict[str, Any], label: str
) -> None:
    """Its entries were keyed by each row's CR, which a prompt of one token more changes
    (4 segments: T / 8): the edge rows made two candidates, 'prism cr 5439.25 x2' whose
    every prompt fitted 'up to the model's positions' and one where 'no prompt fits'."""
    question = llm_question(
        tmp_path,
        set=[
            f"workload.output_tokens={OUTPUT_TOKENS}",
            "strategies=" + json.dumps([{"name": "prism", **strategy}]),
        ],
        axes={"batch": [8], "bandwidth_mbps": [400], "devices": [2], "prompt_tokens": [128]},
        question={"kind": "longest_context"},
    )
    loaded = load_question(question)
    outcome = run_plan(loaded, tmp_path / "out", SerialExecutor(), write_plan_report)
    (entry,) = outcome.answer["candidates"]
    assert entry["candidate"] == label
    assert entry["longest_prompt_tokens"] is not None and entry["longest_prompt_tokens"] > 128
    assert entry["stopped_by"].startswith("out of memory on jetson-")
    assert entry["stopped_by"].endswith("(prefill)")  # rank 1 attends over the most keys


@pytest.mark.timeout(120)
def test_best_mode_names_a_prism_candidate_as_asked_at_every_prompt(tmp_path: Path) -> None:
    """Its grids named a split by segments by the CR of each prompt's rows (4 segments on 2
    boards: T / 8): 'prism cr 16 x2' at 128 tokens and 'prism cr 64 x2' at 512, one
    candidate looking like two, in the grids, the front and ``strategy_of``."""
    question = llm_question(
        tmp_path,
        set=[
            f"workload.output_tokens={OUTPUT_TOKENS}",
            "strategies=[{name: prism, segments: [4]}]",
        ],
        axes={"batch": [1], "bandwidth_mbps": [900], "devices": [2], "prompt_tokens": [128, 512]},
        question={"kind": "best_mode"},
    )
    outcome = run_plan(
        load_question(question), tmp_path / "out", SerialExecutor(), write_plan_report
    )
    answer = outcome.answer
    assert {row.cr for row in outcome.rows} == {16, 64}  # the CR its rows say
    assert [grid["best"] for grid in answer["grids"]] == [[["prism L4 x2"]]] * 2
    assert {point["candidate"] for point in answer["pareto"]} == {"prism L4 x2"}
    assert answer["strategy_of"] == {"prism L4 x2": "prism"}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("strategy", ["single", "voltage"])
def test_longest_context_searches_below_a_swept_prompt_that_does_not_fit(
    strategy: str,
) -> None:
    """The search started at the shortest swept prompt: 50,000 tokens at batch 8, more
    than one board (or two by positions) holds, and the answer said 'no prompt fits'
    though every prompt up to 6,610 (11,746) does."""
    sets = [f"workload.output_tokens={OUTPUT_TOKENS}", "sweeps=[{batch: [8], devices: [2]}]"]
    scenario = load_scenario(SCENARIO, sets)
    fleet = build_fleet(scenario, SCENARIO)
    search = next(c for c in configurations(scenario) if c.strategy == strategy)
    edges = memory_edge_configs(scenario, fleet, search)  # from the workload's 512 tokens
    too_long = search.model_copy(update={"prompt_tokens": 50000})
    assert decoder_memory_status(scenario, fleet, too_long) != "ok"
    assert memory_edge_configs(scenario, fleet, too_long) == edges
    fits, fails = (e.prompt_tokens for e in edges)
    assert fits is not None and fails == fits + 1 and fits < 50000


def test_longest_context_ends_where_the_scenario_check_does() -> None:
    """At batch 1 a model of 16,384 positions ends before a board's RAM: the search's
    prompt fills them (prompt + output - 1 positions; it stopped one short), which the
    scenario takes and one more it refuses, naming the field. (The model's own 131,072
    did until 2026-12-07: a prefill that long holds a 34 GB attention mask.)"""
    sets = [
        f"workload.output_tokens={OUTPUT_TOKENS}",
        "sweeps=[{batch: [1], devices: [2]}]",
        "model.max_positions=16384",
    ]
    scenario = load_scenario(SCENARIO, sets)
    model = scenario.model
    assert isinstance(model, DecoderSpec)
    search = next(c for c in configurations(scenario) if c.strategy == "single")
    (edge,) = memory_edge_configs(scenario, build_fleet(scenario, SCENARIO), search)
    assert edge.prompt_tokens == model.max_positions - OUTPUT_TOKENS + 1
    load_scenario(SCENARIO, [*sets, f"workload.prompt_tokens={edge.prompt_tokens}"])
    with pytest.raises(InputError, match="feed 16,385 positions") as error:
        load_scenario(SCENARIO, [*sets, f"workload.prompt_tokens={edge.prompt_tokens + 1}"])
    assert error.value.field == "workload.prompt_tokens"


def test_longest_context_needs_a_decoder_and_lists_share_a_sweep(tmp_path: Path) -> None:
    encoder = llm_question(
        tmp_path,
        scenario=str(REPO / "scenarios" / "prism_jetson.yaml"),
        set=[],
        axes={"batch": [1], "bandwidth_mbps": [400]},
        question={"kind": "longest_context"},
    )
    with pytest.raises(InputError, match="longest_context needs a decoder") as error:
        load_question(encoder)
    assert error.value.field == "question"
    prompts = llm_question(
        tmp_path,
        scenario=str(REPO / "scenarios" / "prism_jetson.yaml"),
        set=[],
        axes={"batch": [1], "bandwidth_mbps": [400], "prompt_tokens": [128]},
        question={"kind": "best_mode"},
    )
    with pytest.raises(InputError, match="are for decoder models") as error:
        load_question(prompts)
    assert error.value.field == "axes.prompt_tokens"  # it named no field
    mixed = llm_question(
        tmp_path,
        question=[
            {"kind": "best_mode"},
            {"kind": "crossover", "strategy": {"name": "prism", "cr": 4}},
        ],
    )
    with pytest.raises(InputError, match="shares one sweep") as error:
        load_question(mixed)
    assert error.value.field == "question"  # these three named no field
    with pytest.raises(InputError, match="a list needs at least one question") as error:
        load_question(llm_question(tmp_path, question=[]))
    assert error.value.field == "question"
    same = llm_question(tmp_path, question=[{"kind": "longest_context"}] * 2)
    with pytest.raises(InputError, match="this longest_context question is asked twice") as error:
        load_question(same)  # its answer was given twice
    assert error.value.field == "question.1"
    two_prompts = llm_question(
        tmp_path,
        axes={"batch": [1], "bandwidth_mbps": [400], "prompt_tokens": [128, 512]},
        question={"kind": "crossover", "strategy": {"name": "prism", "cr": 4}},
    )
    with pytest.raises(InputError, match="crossover takes one prompt and output") as error:
        load_question(two_prompts)
    assert error.value.field == "axes"
    unknown = llm_question(tmp_path, question={"kind": "best_mode", "metrics": ["speed"]})
    with pytest.raises(InputError, match=r"unknown metric 'speed'; known: total_ms, ttft_ms"):
        load_question(unknown)
    twice = llm_question(tmp_path, question={"kind": "best_mode", "metrics": ["ttft_ms"] * 2})
    with pytest.raises(InputError, match="ttft_ms is given twice") as error:  # two same grids
        load_question(twice)
    assert error.value.field == "question.metrics"


def test_plan_page_figures_follow_the_answer(planned: Any) -> None:
    _, answer, out = planned
    figures = questions_figures(answer)
    best, longest = answer["answers"]
    titles = [fig.layout.title.text for fig in figures]
    assert sum(t.startswith("Lowest time to first token") for t in titles) == 1
    assert sum(t.startswith("Lowest time per output token") for t in titles) == 1
    bars = figures[-1]
    entries = longest["candidates"]
    assert [list(t.y) for t in bars.data if t.type == "bar"] == [
        [e["longest_prompt_tokens"] for e in entries]
    ]
    limit = next(t for t in bars.data if t.type == "scatter")
    assert set(limit.y) == {longest["max_positions"] - OUTPUT_TOKENS + 1}
    heat = figures[0].data[0]
    assert [list(row) for row in heat.text] == best["grids"][0]["best"]
    assert "Longest prompt that fits" in (out / "plan.html").read_text()


@pytest.mark.timeout(120)
def test_smallest_fleet_and_crossover_take_a_pipeline(tmp_path: Path) -> None:
    """Pipeline is a decoder's distributed strategy: smallest_fleet and crossover take it
    (it was refused as not distributed); an encoder scenario refuses it, naming the file."""
    target_ms = 1e9  # every fleet meets it: the smallest is the first swept
    fleet = llm_question(
        tmp_path,
        axes={"batch": [1], "bandwidth_mbps": [400], "devices": [2, 4]},
        question={
            "kind": "smallest_fleet",
            "target_p95_ms": target_ms,
            "strategy": {"name": "pipeline"},
        },
    )
    loaded = load_question(fleet)
    assert [s.name for s in loaded.scenario.strategies] == ["single", "pipeline"]
    outcome = run_plan(loaded, tmp_path / "fleet", SerialExecutor(), write_plan_report)
    entry = outcome.answer["per_batch"][0]
    assert entry["smallest_split"] == {"devices": 2, "bandwidth_mbps": 400}
    assert entry["smallest_fleet"] == {"devices": 1, "bandwidth_mbps": None}  # one board meets it
    assert entry["baseline"]["strategy"] == "single" and entry["baseline"]["meets_target"]
    crossover = llm_question(
        tmp_path,
        axes={"batch": [1], "bandwidth_mbps": [200, 900], "devices": [2]},
        question={"kind": "crossover", "strategy": {"name": "pipeline"}},
    )
    names = {s.name for s in load_question(crossover).scenario.strategies}
    assert names == {"single", "pipeline"}
    encoder = llm_question(
        tmp_path,
        scenario=str(REPO / "scenarios" / "prism_jetson.yaml"),
        set=[],
        axes={"batch": [1], "bandwidth_mbps": [400]},
        question={"kind": "crossover", "strategy": {"name": "pipeline"}},
    )
    with pytest.raises(InputError, match="pipeline runs decoder models only"):
        load_question(encoder)


SWEEP_ERRORS = {  # axes -> the field and message a decoder's sweep error gives
    "stages": (
        {"devices": [4]},
        ["model={preset: qwen2_5_0_5b}"],
        "axes.devices",
        "tensor_parallel on 4: heads 14 are not divisible by 4 devices",
    ),
    "positions": (
        {"prompt_tokens": [131000]},
        [],
        "axes.prompt_tokens",
        "131,000 prompt and 128 output tokens feed 131,127 positions",
    ),
}


@pytest.mark.parametrize("case", SWEEP_ERRORS, ids=list(SWEEP_ERRORS))
def test_a_decoder_sweep_error_names_the_axes(case: str, tmp_path: Path) -> None:
    """The decoder's sweep errors name the question's axes (they were 'axes.devices:', with
    the message's colon, and 'sweeps.0', a field the question file does not have)."""
    axes, overrides, field, message = SWEEP_ERRORS[case]
    path = llm_question(
        tmp_path,
        set=overrides,
        axes={"batch": [1], "bandwidth_mbps": [400], **axes},
        question={"kind": "best_mode"},
    )
    with pytest.raises(InputError, match=message) as error:
        load_question(path)
    assert error.value.field == field
    assert "sweeps" not in error.value.problem


@pytest.mark.timeout(120)
def test_longest_context_alone_runs_without_bandwidths(tmp_path: Path) -> None:
    """A longest_context question needed axes.bandwidth_mbps though memory does not depend
    on it: left out, the sweep runs at the scenario's network.bandwidth_mbps and answers
    what a sweep over two bandwidths answers (its TTFT and TPOT at the first swept
    bandwidth: 200 Mbit/s there, 400 here). A question answered per bandwidth still needs
    them, and the error says why."""
    axes = {"batch": [8], "devices": [2], "prompt_tokens": [128]}
    alone = {"kind": "longest_context"}
    without = load_question(llm_question(tmp_path, axes=axes, question=alone))
    answered = run_plan(without, tmp_path / "without", SerialExecutor(), write_plan_report)
    assert {row.bandwidth_mbps for row in answered.rows} == {400.0}  # llm_jetson's network
    swept = llm_question(tmp_path, axes={**axes, "bandwidth_mbps": [200, 900]}, question=alone)
    both = run_plan(load_question(swept), tmp_path / "both", SerialExecutor(), write_plan_report)
    memory = ("candidate", "longest_prompt_tokens", "stopped_by", "weights_mb", "kv_cache_mb")
    fits = [[c[k] for k in memory] for c in answered.answer["candidates"]]
    assert fits == [[c[k] for k in memory] for c in both.answer["candidates"]]
    assert len(fits) == 5  # llm_jetson's strategies: single, pipeline, tensor_parallel, ...
    assert None not in [fit[1] for fit in fits]
    shared = llm_question(tmp_path, axes=axes)  # best_mode answers per bandwidth
    with pytest.raises(InputError, match="best_mode answers per bandwidth") as error:
        load_question(shared)
    assert error.value.field == "axes.bandwidth_mbps"
