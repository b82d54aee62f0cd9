"""Exact event traces of tiny CROWDio pipelines, worked out by hand.

Toy numbers: a session loads in 1000 ms, an inference is 100 ms (0.1 GFLOP
at 1 GFLOP/s), the link moves 10 bytes/ms and every message costs 10 ms
first, so each 100-byte transfer takes 20 ms; aggregation is 1 ms per input.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from edgetwin.configuration import CrowdRun
from edgetwin.scenario import Scenario
from edgetwin.sim.crowd.records import Activity, TraceEvent
from edgetwin.sim.crowd.runner import CrowdOutcome, prepare_crowd, simulate_crowd

TOY_PHONE: dict[str, Any] = {
    "name": "toy_phone",
    "ram_mb": 2000,
    "os_reserved_mb": 1000,
    "cpu_gflops": 1.0,
    "inference_floor_ms": 0,
    "cache_mb": 1000,
    "session": {"floor_s": 1.0, "load_cv": 0},
    "network": {"message_overhead_ms": 10, "bandwidth_efficiency": 1.0},
    "battery": {"capacity_mah": 1000, "voltage_v": 4.0},
    "power": {"idle_w": 1, "inference_w": 10, "load_w": 5, "transfer_w": 2},
}

STAGE = {"size_mb": 0.0006, "ram_mb": 10, "gflops": 0.1}


def toy_phone_file(folder: Path, name: str = "toy_phone", **changes: Any) -> str:
    """A toy phone profile written to ``folder``; ``changes`` are ``section__key=value``."""
    raw = copy.deepcopy(TOY_PHONE)
    raw["name"] = name
    for dotted, value in changes.items():
        *sections, key = dotted.split("__")
        node = raw
        for section in sections:
            node = node[section]
        node[key] = value
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def toy_crowd(
    fleet: list[dict[str, Any]], strategy: str = "crowdio_streaming", **job: Any
) -> dict[str, Any]:
    """A raw crowd scenario: 2 inputs through s0 and s1, warm cache, 10 bytes/ms links."""
    spec: dict[str, Any] = {
        "inputs": 2,
        "stages": [{"name": "s0", **STAGE}, {"name": "s1", **STAGE}],
        "input_bytes": 100,
        "activation_bytes": 200,
        "compression_saving_pct": 50,
        "result_bytes": 100,
        "aggregation_ms_per_input": 1,
    }
    spec.update(job)
    return {
        "name": "toy_crowd",
        "network": {"bandwidth_mbps": 0.08, "latency_ms": 0, "medium": "dedicated"},
        "strategies": [{"name": strategy}],
        "crowd": {"fleet": fleet, "cache": "warm", "job": spec},
    }


def simulate(raw: dict[str, Any], scheduler: str = "affinity", rep: int = 0) -> CrowdOutcome:
    scenario = Scenario.model_validate(raw)
    assert scenario.crowd is not None
    run = CrowdRun(scenario.strategies[0].name, scheduler, rep, scenario.network.bandwidth_mbps)
    raw["crowd"].setdefault("schedulers", [scheduler])
    scenario = Scenario.model_validate(raw)
    return simulate_crowd(scenario, prepare_crowd(scenario, None), run, record=True)


def gantt(outcome: CrowdOutcome, phone: str) -> list[tuple[str, float, float, str]]:
    """(kind, start ms, end ms, what) of one phone's work, in time order."""
    return [
        (a.kind, round(a.start_s * 1e3, 6), round(a.end_s * 1e3, 6), _what(a))
        for a in sorted(outcome.recorder.activities, key=lambda a: (a.start_s, a.end_s))
        if a.phone == phone
    ]


def _what(activity: Activity) -> str:
    item = "" if activity.item is None else f"i{activity.item} "
    return f"{item}{activity.stage or ''} {activity.detail}".strip()


def events(outcome: CrowdOutcome, *kinds: str) -> list[TraceEvent]:
    return [e for e in outcome.recorder.events if not kinds or e.event in kinds]


def test_one_phone_streaming_exact_trace(tmp_path: Path) -> None:
    phone = toy_phone_file(tmp_path)
    outcome = simulate(toy_crowd([{"name": "toy", "profile": phone, "count": 1}]))
    # broadcast load of s0; (i0, s0); (i1, s0) comes first (queued earlier) than (i0, s1);
    # then UNLOAD s0 / LOAD s1 for (i0, s1), and (i1, s1) finds s1 resident.
    assert gantt(outcome, "toy") == [
        ("load", 0, 1000, "s0 warm"),
        ("transfer", 1000, 1020, "i0 s0 in"),
        ("infer", 1020, 1120, "i0 s0"),
        ("transfer", 1120, 1140, "i0 s0 out"),
        ("transfer", 1140, 1160, "i1 s0 in"),
        ("infer", 1160, 1260, "i1 s0"),
        ("transfer", 1260, 1280, "i1 s0 out"),
        ("load", 1280, 2280, "i0 s1 warm"),
        ("transfer", 2280, 2300, "i0 s1 in"),
        ("infer", 2300, 2400, "i0 s1"),
        ("transfer", 2400, 2420, "i0 s1 out"),
        ("transfer", 2420, 2440, "i1 s1 in"),
        ("infer", 2440, 2540, "i1 s1"),
        ("transfer", 2540, 2560, "i1 s1 out"),
    ]
    row = outcome.rows[0]
    assert row.total_ms == pytest.approx(2562)  # + aggregation of 2 inputs
    # critical input i1: inferences 2 x 100; no load (each of its tasks found its stage
    # resident, as the worker reports it: the load just before the task); transfers 4 x 20
    assert (row.compute_ms, row.load_ms, row.comm_ms) == pytest.approx((200, 0, 80))
    assert row.staging_ms == 0  # a phone has no staging phase
    # load 2 s x 5 W, inference 0.4 s x 10 W, transfers 0.16 s x 2 W, idle 2 ms x 1 W
    assert row.energy_j == pytest.approx(10 + 4 + 0.32 + 0.002)
    assert row.battery_mah == pytest.approx((10 + 4 + 0.32 + 0.002) / 3.6 / 4.0)
    assert (row.cold_loads, row.warm_loads, row.evictions) == (0, 2, 1)
    assert row.bytes_sent == 4 * 100  # two activations (200 B at 50 %) and two results
    assert row.bytes_moved == 4 * 200
    assert row.peak_session_mb == 10
    assert row.tasks_redispatched == 0


def test_two_phones_barrier_exact_trace_with_deferred_load(tmp_path: Path) -> None:
    phone = toy_phone_file(tmp_path)
    raw = toy_crowd([{"name": "toy", "profile": phone, "count": 2}], "crowdio_barrier")
    outcome = simulate(raw)
    # Both are sent LOAD s0 (broadcast) and, while loading, one input each (they count as
    # holding s0). toy-0's completion releases s1: nothing is ready (barrier) and toy-0 has
    # no s0 task left, so it is sent the deferred LOAD s1. toy-1's completion, at the same
    # time, lifts the barrier: (i0, s1) goes to toy-0 (s1 queued: the resident tier) and
    # (i1, s1) to toy-1 (s1 cached), which must load it.
    assert gantt(outcome, "toy-0") == [
        ("load", 0, 1000, "s0 warm"),
        ("transfer", 1000, 1020, "i0 s0 in"),
        ("infer", 1020, 1120, "i0 s0"),
        ("transfer", 1120, 1140, "i0 s0 out"),
        ("load", 1140, 2140, "s1 warm"),
        ("transfer", 2140, 2160, "i0 s1 in"),
        ("infer", 2160, 2260, "i0 s1"),
        ("transfer", 2260, 2280, "i0 s1 out"),
    ]
    assert gantt(outcome, "toy-1") == [
        ("load", 0, 1000, "s0 warm"),
        ("transfer", 1000, 1020, "i1 s0 in"),
        ("infer", 1020, 1120, "i1 s0"),
        ("transfer", 1120, 1140, "i1 s0 out"),
        ("load", 1140, 2140, "i1 s1 warm"),
        ("transfer", 2140, 2160, "i1 s1 in"),
        ("infer", 2160, 2260, "i1 s1"),
        ("transfer", 2260, 2280, "i1 s1 out"),
    ]
    assert [(e.phone, e.event, e.stage) for e in events(outcome, "release", "deferred_load")] == [
        ("foreman", "release", "s1"),
        ("toy-0", "deferred_load", "s1"),
    ]
    assert outcome.rows[0].total_ms == pytest.approx(2282)


def test_a_load_begun_before_the_job_counts_only_from_its_submission(tmp_path: Path) -> None:
    """Job 1 arrives at 500 ms while toy-1 loads s0 for job 0's broadcast (0-1000 ms): its
    input waited 500 ms of that load, not 1000 (the whole load made load_ms 2000 of a
    1781 ms job)."""
    phone = toy_phone_file(tmp_path)
    raw = toy_crowd(
        [{"name": "toy", "profile": phone, "count": 2}],
        inputs=1,
        interarrival={"kind": "constant", "value_s": 0.5},
    )
    raw["crowd"]["horizon_s"] = 0.6  # jobs at 0 and 500 ms
    outcome = simulate(raw)
    assert gantt(outcome, "toy-1")[:2] == [
        ("load", 0, 1000, "s0 warm"),
        ("transfer", 1000, 1020, "i0 s0 in"),
    ]
    first, second = outcome.rows
    assert (first.total_ms, first.load_ms) == pytest.approx((2281, 2000))
    # job 1: 500 ms of the broadcast load, then s1's own load; 1 ms of aggregation
    assert (second.compute_ms, second.load_ms, second.comm_ms) == pytest.approx((200, 1500, 80))
    assert second.total_ms == pytest.approx(200 + 1500 + 80 + 1)


def _two_speeds(tmp_path: Path, strategy: str) -> CrowdOutcome:
    fast = toy_phone_file(tmp_path, "fast")
    slow = toy_phone_file(tmp_path, "slow", cpu_gflops=0.5)  # 200 ms inferences
    fleet = [
        {"name": "fast", "profile": fast, "count": 1},
        {"name": "slow", "profile": slow, "count": 1},
    ]
    return simulate(toy_crowd(fleet, strategy))


def test_streaming_starts_a_stage_before_the_previous_stage_ends(tmp_path: Path) -> None:
    outcome = _two_speeds(tmp_path, "crowdio_streaming")
    stage0_done = max(e.t_s for e in events(outcome, "done") if e.stage == "s0")
    stage1_assigned = min(e.t_s for e in events(outcome, "assign") if e.stage == "s1")
    assert stage1_assigned == pytest.approx(1.14)  # (i0, s1) right after (i0, s0)
    assert stage1_assigned < stage0_done == pytest.approx(1.24)


def test_barrier_waits_for_the_whole_stage(tmp_path: Path) -> None:
    outcome = _two_speeds(tmp_path, "crowdio_barrier")
    stage0_done = max(e.t_s for e in events(outcome, "done") if e.stage == "s0")
    stage1_assigned = min(e.t_s for e in events(outcome, "assign") if e.stage == "s1")
    assert stage1_assigned >= stage0_done == pytest.approx(1.24)
    # the fast phone used the wait: the deferred load of s1 started at its own completion
    deferred = events(outcome, "deferred_load")
    assert [(e.phone, e.t_s) for e in deferred] == [("fast", pytest.approx(1.14))]


@pytest.mark.parametrize("strategy", ["crowdio_streaming", "crowdio_barrier"])
def test_later_stages_load_only_after_the_first_upstream_completion(
    tmp_path: Path, strategy: str
) -> None:
    phone = toy_phone_file(tmp_path)
    stages = [{"name": f"s{k}", **STAGE} for k in range(3)]
    raw = toy_crowd(
        [{"name": "toy", "profile": phone, "count": 3}], strategy, inputs=4, stages=stages
    )
    outcome = simulate(raw)
    first_done = {}
    for e in events(outcome, "done"):
        first_done.setdefault(e.stage, e.t_s)
    releases = {e.stage: e.t_s for e in events(outcome, "release")}
    assert releases == {"s1": first_done["s0"], "s2": first_done["s1"]}
    for load in events(outcome, "load_warm", "load_cold"):
        if load.stage != "s0":
            upstream = f"s{int(load.stage[1:]) - 1}" if load.stage else ""
            assert load.t_s >= first_done[upstream], load
    assert outcome.rows[0].status == "ok"


@pytest.mark.parametrize("strategy", ["crowdio_streaming", "crowdio_barrier"])
def test_one_stage_resident_at_a_time_and_unload_before_load(tmp_path: Path, strategy: str) -> None:
    phone = toy_phone_file(tmp_path)
    stages = [{"name": f"s{k}", **STAGE, "ram_mb": 10 + k} for k in range(3)]
    fleet = [{"name": "toy", "profile": phone, "count": 2}]
    outcome = simulate(toy_crowd(fleet, strategy, inputs=5, stages=stages))
    resident: dict[str, str | None] = {"toy-0": None, "toy-1": None}
    for e in outcome.recorder.events:
        if e.event == "unload":
            assert resident[e.phone] == e.stage
            resident[e.phone] = None
        elif e.event in ("load_warm", "load_cold"):
            assert resident[e.phone] is None, f"{e.phone} loads {e.stage} over {resident[e.phone]}"
        elif e.event == "loaded":
            resident[e.phone] = e.stage
    assert max(sample.session_mb for sample in outcome.recorder.ram) == 12
    assert {s.peak_session_mb for s in outcome.phones} == {12}


def test_work_cut_by_the_end_of_the_run_is_in_the_trace(tmp_path: Path) -> None:
    """The run ends at 2,350 ms, halfway through (i0, s1)'s inference: the trace has the
    inference to the end (it left it out, and the Gantt drew the phone idle then)."""
    phone = toy_phone_file(tmp_path)
    raw = toy_crowd([{"name": "toy", "profile": phone, "count": 1}])
    raw["crowd"].update(horizon_s=2.0, drain_s=0.35)
    outcome = simulate(raw)
    assert gantt(outcome, "toy")[-2:] == [
        ("transfer", 2280, 2300, "i0 s1 in"),
        ("infer", 2300, 2350, "i0 s1"),
    ]
    assert outcome.recorder.open == {}
    assert [a.cut for a in outcome.recorder.activities][-2:] == [False, True]
