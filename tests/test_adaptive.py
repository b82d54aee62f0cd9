"""Adaptive deployment: the performance map, its interpolation and the selection policies."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from edgetwin.errors import InputError
from edgetwin.policies.adaptive import (
    POLICIES,
    AdaptivePolicy,
    Objective,
    make_policy,
)
from edgetwin.policies.perf_map import (
    PerformanceMap,
    map_from_table,
    profile_twin,
    read_map,
    validate_map,
    write_map,
)
from edgetwin.results import write_results
from edgetwin.scenario import load_scenario
from edgetwin.sim.runner import build_fleet, run_scenario

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "adaptive_prism.yaml"


def hand_map() -> dict[str, Any]:
    """Batch 1 and 4, 100 and 300 Mbit/s: prism gains with batch and bandwidth."""
    return {
        "scenario": "hand",
        "source": "hand",
        "batches": [1, 4],
        "bandwidths_mbps": [100, 300],
        "candidates": [
            {
                "strategy": "single",
                "devices": 1,
                "gflops_per_device": 10.0,
                "bytes_sent": [0, 0],
                "latency_ms": [[100, 100], [400, 400]],
                "energy_j": [[1, 1], [4, 4]],
            },
            {
                "strategy": "prism",
                "devices": 2,
                "cr": 9.9,
                "segments": 10,
                "gflops_per_device": 6.0,
                "bytes_sent": [1e5, 4e5],
                "latency_ms": [[200, 120], [420, 300]],
                "energy_j": [[2, 1.5], [5, 4.4]],
            },
        ],
    }


@pytest.fixture(scope="module")
def twin_map() -> PerformanceMap:
    return profile_twin(load_scenario(SCENARIO), SCENARIO)


def test_interpolation_is_exact_on_grid_points(twin_map: PerformanceMap) -> None:
    for c in twin_map.candidates:
        for i, batch in enumerate(twin_map.batches):
            for j, bw in enumerate(twin_map.bandwidths_mbps):
                estimate = twin_map.estimate(c, batch, bw)
                assert estimate.latency_ms == c.latency_ms[i][j]
                assert estimate.energy_j == c.energy_j[i][j]


def test_interpolation_is_linear_in_log_batch_and_bandwidth() -> None:
    perf_map = validate_map(hand_map(), None)
    prism = perf_map.candidates[1]
    # batch 2 is halfway between 1 and 4 in log2; 200 Mbit/s halfway between 100 and 300
    assert perf_map.estimate(prism, 2, 100).latency_ms == pytest.approx(310)
    assert perf_map.estimate(prism, 1, 200).latency_ms == pytest.approx(160)
    assert perf_map.estimate(prism, 2, 200).latency_ms == pytest.approx((200 + 120 + 420 + 300) / 4)
    assert perf_map.bytes_sent(prism, 2) == pytest.approx(2.5e5)


def test_outside_the_grid_is_clamped_to_the_edge() -> None:
    perf_map = validate_map(hand_map(), None)
    prism = perf_map.candidates[1]
    assert perf_map.estimate(prism, 0.5, 50).latency_ms == 200
    assert perf_map.estimate(prism, 64, 1000).latency_ms == 300
    assert perf_map.estimate(prism, 64, 50).energy_j == 5
    assert perf_map.estimate(prism, 1, 1000).energy_j == 1.5


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


def test_devices_filter_the_candidates() -> None:
    policy = AdaptivePolicy(validate_map(hand_map(), None))
    assert policy.choose(4, 300, devices=2).strategy == "prism"
    with pytest.raises(ValueError, match="no candidate on 3 devices"):
        policy.choose(4, 300, devices=3)


def test_weight_outside_0_1_is_refused() -> None:
    with pytest.raises(ValueError, match="weight"):
        Objective("weighted", 1.5)


def test_map_round_trips_through_json(tmp_path: Path, twin_map: PerformanceMap) -> None:
    path = tmp_path / "map.json"
    write_map(path, twin_map)
    assert read_map(path) == twin_map
    stored = AdaptivePolicy.from_map(path)
    live = AdaptivePolicy(twin_map)
    for batch, bw in [(1, 250), (3, 333), (12, 750), (48, 1000)]:
        assert stored.choose(batch, bw) == live.choose(batch, bw)


def test_map_from_a_results_table_matches_the_twin(
    tmp_path: Path, twin_map: PerformanceMap
) -> None:
    scenario = load_scenario(SCENARIO)
    rows = [o.row for o in run_scenario(scenario, build_fleet(scenario, SCENARIO))]
    table = tmp_path / "results.csv"
    write_results(table, rows)
    from_table = map_from_table(table)
    assert from_table.batches == twin_map.batches
    assert from_table.bandwidths_mbps == twin_map.bandwidths_mbps
    for a, b in zip(from_table.candidates, twin_map.candidates, strict=True):
        assert a.label == b.label
        for row_a, row_b in zip(a.latency_ms, b.latency_ms, strict=True):
            assert row_a == pytest.approx(row_b, rel=1e-6)
    write_results(table, [r for r in rows if not (r.strategy == "voltage" and r.batch == 8)])
    with pytest.raises(InputError, match="no row at batch 8") as exc:
        map_from_table(table)
    assert exc.value.path == str(table)
    assert exc.value.field == "voltage devices=2"


def _write(tmp_path: Path, raw: Any) -> Path:
    path = tmp_path / "map.json"
    path.write_text(json.dumps(raw))
    return path


def test_bad_map_files_name_the_file_and_field(tmp_path: Path) -> None:
    raw = hand_map()
    raw["candidates"][1]["latency_ms"][0][1] = "fast"
    path = _write(tmp_path, raw)
    with pytest.raises(InputError) as exc:
        AdaptivePolicy.from_map(path)
    assert exc.value.path == str(path)
    assert exc.value.field == "candidates.1.latency_ms.0.1"

    raw = hand_map()
    raw["candidates"][0]["energy_j"] = [[1, 1]]
    with pytest.raises(InputError, match=r"candidates\.0\.energy_j must be 2 x 2"):
        read_map(_write(tmp_path, raw))

    raw = hand_map()
    del raw["candidates"][0]
    with pytest.raises(InputError, match="needs a 'single' candidate"):
        read_map(_write(tmp_path, raw))

    raw = hand_map()
    raw["bandwidths_mbps"] = [300, 100]
    with pytest.raises(InputError, match="strictly increasing"):
        read_map(_write(tmp_path, raw))

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


def test_a_failed_cell_is_never_chosen() -> None:
    raw = hand_map()
    raw["candidates"][1]["latency_ms"][1][1] = None  # out of memory, say
    policy = AdaptivePolicy(validate_map(raw, None))
    decision = policy.choose(4, 300)
    assert decision.strategy == "single"
    assert math.isnan(policy.map.estimate(policy.map.candidates[1], 4, 300).latency_ms)
