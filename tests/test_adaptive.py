"""Adaptive deployment: the performance map, its interpolation and the selection policies."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgetwin.errors import InputError
from edgetwin.evaluate.profiling import profile_twin, rows_at_tokens
from edgetwin.models.layout import segments_for_cr
from edgetwin.policies.adaptive import (
    POLICIES,
    AdaptivePolicy,
    Objective,
    ObjectiveKind,
    make_policy,
)
from edgetwin.policies.perf_map import Estimate, PerformanceMap
from edgetwin.policies.perf_map_from_rows import map_from_table
from edgetwin.policies.perf_map_io import read_map, validate_map, write_map
from edgetwin.policies.tokens_axis import along_tokens
from edgetwin.results import write_results
from edgetwin.scenario import load_scenario
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.runner import run_scenario

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "adaptive_prism.yaml"


def hand_map() -> dict[str, Any]:
    """197 tokens, batch 1 and 4, 100 and 300 Mbit/s: prism gains with batch and bandwidth."""
    return {
        "scenario": "hand",
        "source": "hand",
        "tokens": [197],
        "batches": [1, 4],
        "bandwidths_mbps": [100, 300],
        "candidates": [
            {
                "strategy": "single",
                "devices": 1,
                "gflops_per_device": 10.0,
                "bytes_sent": [[0, 0]],
                "latency_ms": [[[100, 100], [400, 400]]],
                "energy_j": [[[1, 1], [4, 4]]],
            },
            {
                "strategy": "prism",
                "devices": 2,
                "cr": 9.9,
                "gflops_per_device": 6.0,
                "bytes_sent": [[1e5, 4e5]],
                "latency_ms": [[[200, 120], [420, 300]]],
                "energy_j": [[[2, 1.5], [5, 4.4]]],
            },
        ],
    }


@pytest.fixture(scope="module")
def twin_map() -> PerformanceMap:
    return profile_twin(load_scenario(SCENARIO), SCENARIO)


@pytest.fixture(scope="module")
def tokens_map() -> PerformanceMap:
    """The shipped scenario at batch 1, 8, 32 x 200, 800 Mbit/s x 101, 197, 325 tokens."""
    scenario = load_scenario(
        SCENARIO, ["sweeps.0.batch=[1, 8, 32]", "sweeps.0.bandwidth_mbps=[200, 800]"]
    )
    return profile_twin(scenario, SCENARIO, (101, 197, 325))


def test_interpolation_is_exact_on_grid_points(tokens_map: PerformanceMap) -> None:
    for c in tokens_map.candidates:
        for k, tokens in enumerate(tokens_map.tokens):
            for i, batch in enumerate(tokens_map.batches):
                for j, bw in enumerate(tokens_map.bandwidths_mbps):
                    estimate = tokens_map.estimate(c, batch, bw, tokens)
                    assert estimate.latency_ms == c.latency_ms[k][i][j]
                    assert estimate.energy_j == c.energy_j[k][i][j]


def test_interpolation_is_linear_in_the_batch_and_in_one_over_bandwidth() -> None:
    """Between swept bandwidths a latency goes as a + b / bandwidth (a transfer's bits over
    its rate): prism's batch 1 is 200 ms at 100 Mbit/s and 120 at 300, 80 + 12000 / W, so
    140 ms at 200 Mbit/s (linear in bandwidth said 160, more than the curve anywhere).
    Between profiled batches it goes as a + b x batch (a step's fixed part plus each
    sample's work): batch 2 is a third of the way from 1 to 4 (log2(batch) said half)."""
    perf_map = validate_map(hand_map(), None)
    prism = perf_map.candidates[1]
    assert perf_map.estimate(prism, 2, 100, 197).latency_ms == pytest.approx(200 + 220 / 3)
    assert perf_map.estimate(prism, 1, 200, 197).latency_ms == pytest.approx(80 + 12000 / 200)
    assert perf_map.estimate(prism, 1, 150, 197).latency_ms == pytest.approx(80 + 12000 / 150)
    batch_4_at_200 = 300 + (420 - 300) * (1 / 200 - 1 / 300) / (1 / 100 - 1 / 300)
    assert perf_map.estimate(prism, 2, 200, 197).latency_ms == pytest.approx(
        140 + (batch_4_at_200 - 140) / 3
    )
    assert perf_map.bytes_sent(prism, 2, 197) == pytest.approx(2e5)  # 1e5 + 3e5 / 3


def test_outside_the_grid_is_clamped_to_the_edge() -> None:
    perf_map = validate_map(hand_map(), None)
    prism = perf_map.candidates[1]
    assert perf_map.estimate(prism, 0.5, 50, 197).latency_ms == 200
    assert perf_map.estimate(prism, 64, 1000, 197).latency_ms == 300
    assert perf_map.estimate(prism, 64, 50, 197).energy_j == 5
    assert perf_map.estimate(prism, 1, 1000, 197).energy_j == 1.5


def test_adaptive_picks_the_lowest_interpolated_objective() -> None:
    policy = AdaptivePolicy(validate_map(hand_map(), None))
    assert policy.choose(1, 100).strategy == "single"
    decision = policy.choose(4, 300)
    assert (decision.strategy, decision.cr, decision.segments) == ("prism", 9.9, 10)
    assert (decision.expected_latency_ms, decision.expected_energy_j) == (300, 4.4)
    assert policy.choose(64, 1000).strategy == "prism"  # clamped to (4, 300)


def test_objective_switches_decisions_where_it_should(twin_map: PerformanceMap) -> None:
    latency = AdaptivePolicy(twin_map, Objective("latency"))
    energy = AdaptivePolicy(twin_map, Objective("energy"))
    # batch 16 at 400 Mbit/s: Prism is faster, one board uses less energy
    assert latency.choose(16, 400).label == "prism cr 9.9 x2"
    assert energy.choose(16, 400).label == "single"
    # batch 1: single on both counts
    assert latency.choose(1, 400).label == energy.choose(1, 400).label == "single"
    # weighted: weight 1 is the latency objective, weight 0 the energy one
    for batch in (1, 3, 6, 16):
        assert AdaptivePolicy(twin_map, Objective("weighted", 1.0)).choose(batch, 500).label == (
            latency.choose(batch, 500).label
        )
        assert AdaptivePolicy(twin_map, Objective("weighted", 0.0)).choose(batch, 500).label == (
            energy.choose(batch, 500).label
        )


def test_baselines() -> None:
    perf_map = validate_map(hand_map(), None)
    assert make_policy("always_single", perf_map).choose(4, 300).strategy == "single"
    assert make_policy("always_distributed", perf_map).choose(1, 100).strategy == "prism"
    heuristic = make_policy("flop_heuristic", perf_map)
    # batch 4 at 300 Mbit/s: 16 GFLOPs saved at 100 GFLOP/s = 160 ms > 400 kB / 2 at 300 Mbit/s
    assert heuristic.choose(4, 300).strategy == "prism"
    # 0.1 Mbit/s: moving 200 kB takes 16 s, far more than the compute saved
    assert heuristic.choose(4, 0.1).strategy == "single"
    assert sorted(POLICIES) == sorted(
        ["adaptive", "always_single", "always_distributed", "flop_heuristic"]
    )
    with pytest.raises(KeyError, match="known"):
        make_policy("oracle", perf_map)


def two_and_four_map() -> dict[str, Any]:
    """The hand map plus Prism on four devices: slower at batch 1, fastest at batch 4."""
    raw = hand_map()
    four = dict(raw["candidates"][1], devices=4, gflops_per_device=4.0)
    four["latency_ms"] = [[[260, 150], [300, 180]]]
    raw["candidates"].append(four)
    return raw


def test_devices_up_allow_every_profiled_count_up_to_them() -> None:
    """A map on 2 and 4 devices: with N up the policy deploys on a profiled count <= N."""
    policy = AdaptivePolicy(validate_map(two_and_four_map(), None))
    on = {up: [c.label for c in policy.candidates(up)] for up in (1, 2, 3, 4, 5)}
    assert on[1] == ["single"]
    assert on[2] == on[3] == ["single", "prism cr 9.9 x2"]
    assert on[4] == on[5] == ["single", "prism cr 9.9 x2", "prism cr 9.9 x4"]
    # batch 4 at 300 Mbit/s: four devices are best (180 ms), two next (300), one last (400)
    picks = {up: policy.choose(4, 300, devices=up).label for up in (None, 1, 2, 3, 4, 5)}
    assert picks == {
        None: "prism cr 9.9 x4",
        1: "single",
        2: "prism cr 9.9 x2",
        3: "prism cr 9.9 x2",  # three up: two of them, not an unprofiled three
        4: "prism cr 9.9 x4",
        5: "prism cr 9.9 x4",  # more up than the map's largest count: the largest
    }
    for devices in (0, 2.5, True):  # 2.5 was "at most 2.5", True was 1
        with pytest.raises(ValueError, match="a whole number, at least 1"):
            policy.choose(4, 300, devices=devices)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("batch", "bandwidth_mbps"), [(0, 300), (-4, 300), (4, -5), (4, math.nan), (True, 300)]
)
def test_an_observed_condition_that_cannot_be_is_a_value_error(
    batch: float, bandwidth_mbps: float
) -> None:
    """Batch 0 was a 'math domain error' from the map's log2 (a traceback of the worker's
    ``--strategy adaptive --batch 0``); a negative bandwidth was clamped and decided on."""
    policy = make_policy("adaptive", validate_map(hand_map(), None))
    for name in ("adaptive", "always_single", "flop_heuristic"):
        with pytest.raises(ValueError, match="must be a positive number"):
            make_policy(name, policy.map).choose(batch, bandwidth_mbps)


def test_output_tokens_on_an_encoder_map_are_a_value_error() -> None:
    """An encoder's map has no output length: a query's was ignored, and the answer read as
    one for that length."""
    perf_map = validate_map(hand_map(), None)
    for name in POLICIES:
        with pytest.raises(ValueError, match="an encoder's map has no output tokens"):
            make_policy(name, perf_map).choose(4, 300, output_tokens=32)


@pytest.mark.parametrize("tokens", [0, -5, math.nan])
def test_an_observed_sequence_length_that_cannot_be_is_a_value_error(tokens: float) -> None:
    """Tokens 0 or below were extrapolated to a decision (single at 0 ms on -5 tokens,
    Prism with 1 segment on 0)."""
    perf_map = validate_map(hand_map(), None)
    for name in POLICIES:
        with pytest.raises(ValueError, match="the observed tokens must be a positive number"):
            make_policy(name, perf_map).choose(4, 300, tokens=tokens)


@pytest.mark.parametrize("objective", ["latency", "energy", "weighted"])
@pytest.mark.parametrize("zero", [0, 1], ids=["single", "prism"])
def test_a_zero_in_the_map_leaves_every_policy_a_pick(objective: ObjectiveKind, zero: int) -> None:
    """A map cell may be 0 (a measured table's total_ms of 0): always_distributed divided
    by single's 0 ms (ZeroDivisionError) or took the log of Prism's 0 (math domain error),
    the FLOP heuristic divided by single's time: a traceback of evaluate with such a
    map_table, of the worker with such a map."""
    raw = hand_map()
    raw["candidates"][zero]["latency_ms"] = [[[0, 0], [0, 0]]]
    raw["candidates"][zero]["energy_j"] = [[[0, 0], [0, 0]]]
    perf_map = validate_map(raw, None)
    for name in POLICIES:
        decision = make_policy(name, perf_map, Objective(objective)).choose(2, 200)
        assert decision.label in {"single", "prism cr 9.9 x2"}


def test_baselines_respect_the_devices_up() -> None:
    perf_map = validate_map(two_and_four_map(), None)
    distributed = make_policy("always_distributed", perf_map)
    assert distributed.choose(4, 300, devices=1).label == "single"  # nothing else fits
    assert distributed.choose(4, 300, devices=3).devices == 2
    heuristic = make_policy("flop_heuristic", perf_map)
    assert heuristic.choose(4, 300).devices == 4  # more FLOPs saved per device on four
    assert heuristic.choose(4, 300, devices=3).devices == 2
    raw = hand_map()
    del raw["candidates"][1]
    with pytest.raises(ValueError, match="no distributed candidate"):
        make_policy("always_distributed", validate_map(raw, None)).choose(4, 300)


def test_always_distributed_scores_each_candidate_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its candidate does not depend on the condition: each one's ratio over the map's
    grid is computed once, not at every pick (800 times for 200 conditions before)."""
    from edgetwin.policies.adaptive import AlwaysDistributedPolicy

    scored: list[str] = []
    overall = AlwaysDistributedPolicy._overall_log_ratio

    def counted(self: AlwaysDistributedPolicy, candidate: Any) -> float:
        scored.append(candidate.label)
        return overall(self, candidate)

    monkeypatch.setattr(AlwaysDistributedPolicy, "_overall_log_ratio", counted)
    policy = make_policy("always_distributed", validate_map(two_and_four_map(), None))
    picks = {
        policy.choose(batch, bw, devices=up).label
        for batch in (1, 4)
        for bw in (100, 300)
        for up in (2, 3, 4)
    }
    assert picks == {"prism cr 9.9 x2", "prism cr 9.9 x4"}
    assert sorted(scored) == ["prism cr 9.9 x2", "prism cr 9.9 x4"]


@pytest.mark.parametrize(("latency_ms", "energy_j"), [(100.0, 0.0), (0.0, 2.0)])
def test_a_weighted_cost_against_a_single_of_zero_is_not_known(
    latency_ms: float, energy_j: float
) -> None:
    """A measured 0 J (or 0 ms) for single at a condition was a ZeroDivisionError (a
    traceback of evaluate with a truth table holding it); the ratio is not known: +inf."""
    single = Estimate(latency_ms=latency_ms, energy_j=energy_j)
    other = Estimate(latency_ms=80.0, energy_j=1.5)
    assert Objective("weighted").cost(other, single) == math.inf
    assert Objective("latency").cost(other, single) == 80.0


def test_weight_outside_0_1_is_refused() -> None:
    with pytest.raises(ValueError, match="weight"):
        Objective("weighted", 1.5)


@pytest.mark.parametrize("kind", ["Latency", "energy_per_token", "throughput", ""])
def test_an_unknown_objective_is_refused(kind: str) -> None:
    """Objective("Latency") (a terminal device's typo) was taken and costed every candidate
    as weighted 0.5, the branch any unknown kind fell through to: a policy that minimised
    something no one asked for, silently. Now a ValueError names the known kinds."""
    with pytest.raises(ValueError, match=r"unknown objective .*known: latency, energy, weighted"):
        Objective(kind)  # type: ignore[arg-type]


def test_map_round_trips_through_json(tmp_path: Path, twin_map: PerformanceMap) -> None:
    path = tmp_path / "map.json"
    write_map(path, twin_map)
    assert read_map(path) == twin_map
    stored = AdaptivePolicy.from_map(str(path))  # a path as a string, as a user types it
    live = AdaptivePolicy(twin_map)
    for batch, bw in [(1, 250), (3, 333), (12, 750), (48, 1000)]:
        assert stored.choose(batch, bw) == live.choose(batch, bw)


def _assert_same_grids(a: PerformanceMap, b: PerformanceMap) -> None:
    assert (a.tokens, a.batches, a.bandwidths_mbps) == (b.tokens, b.batches, b.bandwidths_mbps)
    for x, y in zip(a.candidates, b.candidates, strict=True):  # the same deployments
        assert (x.strategy, x.devices, x.segments(a.tokens[0])) == (
            y.strategy,
            y.devices,
            y.segments(b.tokens[0]),
        )
        assert np.array(x.latency_ms) == pytest.approx(np.array(y.latency_ms), rel=1e-6)


def test_map_from_a_results_table_matches_the_twin(
    tmp_path: Path, twin_map: PerformanceMap, tokens_map: PerformanceMap
) -> None:
    scenario = load_scenario(SCENARIO)
    rows = [o.row for o in run_scenario(scenario, build_fleet(scenario, SCENARIO))]
    table = tmp_path / "results.csv"
    write_results(table, rows)  # no tokens column: the rows ran at the given length
    table_map = map_from_table(table, 197)
    _assert_same_grids(table_map, twin_map)
    assert "prism cr 9.85 x2" in {c.label for c in table_map.candidates}  # the CR used
    write_results(table, [r for r in rows if not (r.strategy == "voltage" and r.batch == 8)])
    with pytest.raises(InputError, match="no row at tokens 197, batch 8") as exc:
        map_from_table(table, 197)
    assert exc.value.path == str(table)
    assert exc.value.field == "voltage devices=2"

    swept = load_scenario(
        SCENARIO, ["sweeps.0.batch=[1, 8, 32]", "sweeps.0.bandwidth_mbps=[200, 800]"]
    )
    write_results(table, rows_at_tokens(swept, SCENARIO, swept.sweeps[0], (101, 197, 325)))
    assert "tokens" in table.read_text().splitlines()[0].split(",")
    _assert_same_grids(map_from_table(table, 197), tokens_map)


def _write(tmp_path: Path, raw: Any) -> Path:
    path = tmp_path / "map.json"
    path.write_text(json.dumps(raw))
    return path


def test_bad_map_files_name_the_file_and_field(tmp_path: Path) -> None:
    raw = hand_map()
    raw["candidates"][1]["latency_ms"][0][0][1] = "fast"
    path = _write(tmp_path, raw)
    with pytest.raises(InputError) as exc:
        AdaptivePolicy.from_map(path)
    assert exc.value.path == str(path)
    assert exc.value.field == "candidates.1.latency_ms.0.0.1"

    raw = hand_map()
    raw["candidates"][0]["energy_j"] = [[[1, 1]]]
    with pytest.raises(InputError, match=r": must be 1 x 2 x 2 \(tokens x batch") as exc:
        read_map(_write(tmp_path, raw))
    assert exc.value.field == "candidates.0.energy_j"

    raw = hand_map()
    raw["version"] = 1
    with pytest.raises(InputError, match="version 1 maps are not read") as exc:
        read_map(_write(tmp_path, raw))
    assert (exc.value.path, exc.value.field) == (str(path), "version")

    raw = hand_map()
    del raw["candidates"][0]
    with pytest.raises(InputError, match="needs a 'single' candidate") as exc:
        read_map(_write(tmp_path, raw))
    assert exc.value.field == "candidates"  # the docs promise the field (it named none)

    raw = hand_map()
    raw["candidates"].append(raw["candidates"][1])
    with pytest.raises(InputError, match="must be unique") as exc:
        read_map(_write(tmp_path, raw))
    assert exc.value.field == "candidates"

    raw = hand_map()
    raw["bandwidths_mbps"] = [300, 100]
    with pytest.raises(InputError, match="strictly increasing") as exc:
        read_map(_write(tmp_path, raw))
    assert exc.value.field == "bandwidths_mbps"

    raw = hand_map()
    raw["candidates"][1]["power_w"] = 3
    with pytest.raises(InputError) as exc:
        read_map(_write(tmp_path, raw))
    assert exc.value.field == "candidates.1.power_w"

    path.write_text("{not json")
    with pytest.raises(InputError, match="malformed JSON") as exc:
        read_map(path)
    assert exc.value.path == str(path)
    with pytest.raises(InputError, match="file not found"):
        read_map(tmp_path / "absent.json")


@pytest.mark.parametrize(
    ("index", "changes", "problem"),
    [
        (0, {"devices": 2}, "single runs on 1 device, not 2"),
        (1, {"devices": 1}, "prism runs on 2 or more devices, not 1"),
        (1, {"cr": None}, "prism needs its cr"),
        (0, {"cr": 9.9}, "single takes no cr"),
    ],
)
def test_a_candidate_that_contradicts_its_strategy_is_refused(
    tmp_path: Path, index: int, changes: dict[str, Any], problem: str
) -> None:
    """Such a map was read: single on 2 devices made choose(devices=1) fail with 'min() arg
    is an empty sequence' (the worker's one line on --world 1), and a Prism candidate
    without a CR was picked with no segments for the worker to run."""
    raw = hand_map()
    raw["candidates"][index].update(changes)
    path = _write(tmp_path, raw)
    with pytest.raises(InputError, match=problem) as exc:
        read_map(path)
    assert (exc.value.path, exc.value.field) == (str(path), f"candidates.{index}")


def test_a_table_whose_prism_rows_lack_a_cr_is_refused(tmp_path: Path) -> None:
    """Its Prism rows of every segment count were averaged into one candidate ('prism
    x2'), which the policies then picked without segments."""
    scenario = load_scenario(SCENARIO, ["sweeps.0.batch=[1, 8]", "sweeps.0.bandwidth_mbps=[400]"])
    rows = [o.row for o in run_scenario(scenario, build_fleet(scenario, SCENARIO))]
    table = tmp_path / "results.csv"
    write_results(table, [r if r.strategy != "prism" else replace(r, cr=None) for r in rows])
    with pytest.raises(InputError, match="prism needs its cr") as exc:
        map_from_table(table, 197)
    assert (exc.value.path, exc.value.field) == (str(table), "cr")


def test_a_failed_cell_is_never_chosen() -> None:
    raw = hand_map()
    raw["candidates"][1]["latency_ms"][0][1][1] = None  # out of memory, say
    policy = AdaptivePolicy(validate_map(raw, None))
    decision = policy.choose(4, 300)
    assert decision.strategy == "single"
    assert math.isnan(policy.map.estimate(policy.map.candidates[1], 4, 300, 197).latency_ms)


def two_lengths_map() -> dict[str, Any]:
    """The hand map at 100 and 200 tokens; at 200 every value doubles."""
    raw = hand_map()
    raw["tokens"] = [100, 200]
    for c in raw["candidates"]:
        for key in ("bytes_sent", "latency_ms", "energy_j"):
            c[key] = [c[key][0], (2 * np.array(c[key][0])).tolist()]
    return raw


def test_tokens_are_interpolated_and_extrapolated_linearly() -> None:
    perf_map = validate_map(two_lengths_map(), None)
    prism = perf_map.candidates[1]
    assert perf_map.estimate(prism, 4, 300, 150).latency_ms == pytest.approx(450)
    assert perf_map.estimate(prism, 4, 300, 400).latency_ms == pytest.approx(1200)
    assert perf_map.estimate(prism, 4, 300, 50).latency_ms == pytest.approx(150)
    assert perf_map.estimate(prism, 4, 300, 10).latency_ms == pytest.approx(30)
    assert perf_map.bytes_sent(prism, 4, 300) == pytest.approx(1.2e6)
    assert along_tokens(1, [100, 200], [10.0, 100.0]) == 0.0  # never below zero
    assert math.isnan(along_tokens(300, [100, 200], [math.nan, 1.0]))


def test_decision_follows_the_sequence_length() -> None:
    policy = AdaptivePolicy(validate_map(two_lengths_map(), None))
    with pytest.raises(ValueError, match="give the query's tokens"):
        policy.choose(4, 300)
    for tokens in (64, 100, 150, 577):
        decision = policy.choose(4, 300, tokens=tokens)
        assert decision.segments == segments_for_cr(tokens, 2, 9.9)
        assert decision.expected_latency_ms == pytest.approx(300 * tokens / 100)


def test_tokens_change_the_twin_decision(tokens_map: PerformanceMap) -> None:
    """Longer sequences make splitting pay at smaller batches (compute grows faster
    than the fixed per-message costs)."""
    policy = AdaptivePolicy(tokens_map)
    picks = [policy.choose(8, 200, tokens=n).strategy for n in (101, 197, 325)]
    assert picks[0] == "single" and picks[-1] == "prism"
