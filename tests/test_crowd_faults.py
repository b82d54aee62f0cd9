"""Faults: a session that does not fit, a battery that runs empty, phones that come and go."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from edgetwin.configuration import CrowdRun, crowd_runs
from edgetwin.errors import InputError
from edgetwin.models.crowd.table import TaskState
from edgetwin.scenario import Scenario, load_scenario
from edgetwin.sim.crowd.runner import CrowdOutcome, prepare_crowd, simulate_crowd
from tests.conftest import REPO
from tests.test_crowd_events import STAGE, events, gantt, simulate, toy_crowd, toy_phone_file


def assert_exactly_once(outcome: CrowdOutcome) -> None:
    """Every task of every job done once; every job aggregated once."""
    done = Counter((e.job, e.item, e.stage) for e in events(outcome, "done"))
    for job in outcome.jobs:
        assert job.finished, f"job {job.job_id} unfinished"
        assert job.items_done == job.spec.inputs
        for tasks in job.tasks:
            for task in tasks:
                assert task.state is TaskState.DONE
                assert done[(job.job_id, task.item, task.stage.name)] == 1
    assert sum(done.values()) == sum(j.spec.inputs * j.stages for j in outcome.jobs)
    assert Counter(e.job for e in events(outcome, "finished")) == {
        j.job_id: 1 for j in outcome.jobs
    }
    lost = len(events(outcome, "lost", "rescheduled", "overdue"))
    assert sum(row.tasks_redispatched or 0 for row in outcome.rows) == lost
    assert all(row.status == "ok" for row in outcome.rows)


def test_a_stage_that_does_not_fit_fails_there_and_is_rescheduled(tmp_path: Path) -> None:
    phone = toy_phone_file(tmp_path)
    fleet = [
        {"name": "small", "profile": phone, "count": 1, "ram_mb": 2000},  # 1000 MB for sessions
        {"name": "big", "profile": phone, "count": 1, "ram_mb": 4000},  # 3000 MB
    ]
    stages = [{"name": "s0", **STAGE}, {"name": "s1", **STAGE, "load_peak_mb": 1500}]
    outcome = simulate(toy_crowd(fleet, stages=stages), scheduler="fifo")
    oom = events(outcome, "out_of_memory")
    assert [(e.phone, e.stage) for e in oom] == [("small", "s1")]  # fifo tries "small" first
    assert {e.phone for e in events(outcome, "done") if e.stage == "s1"} == {"big"}
    assert outcome.rows[0].tasks_redispatched == 1
    assert outcome.rows[0].peak_session_mb == 1500  # the session's peak while it was created
    assert_exactly_once(outcome)


def test_a_phone_whose_battery_runs_empty_leaves_and_its_work_moves(tmp_path: Path) -> None:
    weak = toy_phone_file(tmp_path, "weak", battery__capacity_mah=0.5)  # 7.2 J
    strong = toy_phone_file(tmp_path, "strong")
    fleet = [
        {"name": "weak", "profile": weak, "count": 1},
        {"name": "strong", "profile": strong, "count": 1},
    ]
    stages = [{"name": f"s{k}", **STAGE} for k in range(3)]
    outcome = simulate(toy_crowd(fleet, inputs=3, stages=stages))
    left = events(outcome, "left")
    assert [(e.phone, e.stage) for e in left] == [("weak", "battery empty")]
    summary = {s.phone: s for s in outcome.phones}
    assert summary["weak"].battery_empty and not summary["strong"].battery_empty
    assert summary["weak"].drawn_mah == pytest.approx(0.5)  # all it had, and no more
    # 7.2 J: the 5 J broadcast load, then 2.2 J at 10 W (inference) or less
    assert left[0].t_s < 1.6
    assert not [e for e in outcome.recorder.events if e.phone == "weak" and e.t_s > left[0].t_s]
    assert_exactly_once(outcome)


def test_a_battery_that_empties_while_the_phone_is_away_stops_there(tmp_path: Path) -> None:
    """weak starts at 0.01 % of 1000 mAh at 4 V: 1.44 J (0.1 mAh). It loads s0 at 5 W for
    0.1 s (0.5 J) and leaves; away it drains at idle (1 W), so the other 0.94 J last until
    1.04 s. Back at 1.2 s it is empty: it stays away. It drew 1.44 J, all it had (it drew
    on past empty: 1.6 J, and joined at 1.2 s to leave at once). strong runs both inputs:
    load 1 s x 5 W, transfers 80 ms x 2 W, inferences 0.2 s x 10 W, idle 2 ms x 1 W; the
    job ends at 1282 ms."""
    phone = toy_phone_file(tmp_path)
    fleet = [
        {"name": "weak", "profile": phone, "count": 1, "battery_start_pct": [0.01, 0.01]},
        {"name": "strong", "profile": phone, "count": 1},
    ]
    raw = toy_crowd(fleet, stages=[{"name": "s0", **STAGE}])
    raw["crowd"]["availability_trace"] = _trace_file(tmp_path, [("weak", 0.1, 1.2)])
    outcome = simulate(raw)
    assert [(e.t_s, e.event) for e in outcome.recorder.events if e.phone == "weak"][-2:] == [
        (0.1, "left"),
        (0.1, "lost"),
    ]
    assert gantt(outcome, "weak") == [("load", 0, 100, "s0 warm"), ("away", 100, 1282, "")]
    summary = {s.phone: s for s in outcome.phones}
    assert summary["weak"].battery_empty
    assert summary["weak"].drawn_mah == pytest.approx(0.1)
    row = outcome.rows[0]
    assert row.total_ms == pytest.approx(1282)
    assert row.energy_j == pytest.approx(1.44 + (5 + 0.16 + 2 + 0.002))
    assert_exactly_once(outcome)


def test_a_lost_task_goes_to_an_idle_survivor_at_once(tmp_path: Path) -> None:
    phone = toy_phone_file(tmp_path)
    raw = toy_crowd([{"name": "toy", "profile": phone, "count": 2}], inputs=1)
    raw["crowd"]["availability_trace"] = _trace_file(tmp_path, [("toy-0", 1.05, None)])
    outcome = simulate(raw)
    # toy-0 runs the only input and leaves during its inference; toy-1 is idle with s0
    # resident, so it takes the task at once: 1.05 + 20 + 100 + 20 ms
    assert [(e.phone, e.t_s) for e in events(outcome, "lost")] == [("toy-0", 1.05)]
    done = events(outcome, "done")
    assert (done[0].phone, done[0].stage) == ("toy-1", "s0")
    assert done[0].t_s == pytest.approx(1.19)


def test_a_phone_that_leaves_mid_transfer_frees_its_airtime_at_once(tmp_path: Path) -> None:
    """Two phones on one shared 10 bytes/ms medium receive their 100-byte inputs at once:
    10 ms of overhead (1000-1010 ms), then 5 bytes/ms each. toy-1 leaves at 1015 ms, 25
    bytes in; from then on toy-0 has the whole medium: its other 75 bytes take 7.5 ms, done
    at 1022.5 ms (the flow of the phone that left held half the airtime until 1030 ms).
    toy-0 then runs both inputs: 100 ms inference and 20 ms for each 100-byte transfer,
    then 2 ms of aggregation: the job ends at 1022.5 + 100 + 20 + (20 + 100 + 20) + 2."""
    phone = toy_phone_file(tmp_path)
    fleet = [{"name": "toy", "profile": phone, "count": 2}]
    raw = toy_crowd(fleet, stages=[{"name": "s0", **STAGE}])
    raw["network"]["medium"] = "shared"
    raw["crowd"]["availability_trace"] = _trace_file(tmp_path, [("toy-1", 1.015, None)])
    outcome = simulate(raw)
    assert gantt(outcome, "toy-0")[1:3] == [
        ("transfer", 1000, 1022.5, "i0 s0 in"),
        ("infer", 1022.5, 1122.5, "i0 s0"),
    ]
    assert gantt(outcome, "toy-1")[1:] == [
        ("transfer", 1000, 1015, "i1 s0 in"),
        ("away", 1015, 1284.5, ""),
    ]
    row = outcome.rows[0]
    assert row.total_ms == pytest.approx(1284.5)
    # toy-0: load 1 s x 5 W, transfers 82.5 ms x 2 W, inferences 0.2 s x 10 W, idle 2 ms
    # x 1 W; toy-1: load 5 J, its transfer 15 ms x 2 W, then away (idle) 269.5 ms x 1 W
    assert row.energy_j == pytest.approx((5 + 0.165 + 2 + 0.002) + (5 + 0.03 + 0.2695))
    assert_exactly_once(outcome)

    assert_exactly_once(outcome)


def _unfinished_status(tmp_path: Path, case: str) -> str:
    """The status of a one-job run on two phones that cannot finish, for ``case``."""
    phone = toy_phone_file(tmp_path)
    fleet = [{"name": "toy", "profile": phone, "count": 2}]
    stages = [{"name": "s0", **STAGE}, {"name": "s1", **STAGE}]
    if case == "too big":  # toy's 1000 MB budget cannot create s1; big (3000 MB) leaves
        fleet = [{**fleet[0], "count": 1}, {**fleet[0], "name": "big", "ram_mb": 4000, "count": 1}]
        stages[1] = {**stages[1], "load_peak_mb": 1500}
    if case == "battery":
        fleet = [{"name": "toy", "profile": phone, "count": 2, "battery_start_pct": [0.01, 0.01]}]
    raw = toy_crowd(fleet, stages=stages)
    raw["crowd"].update(horizon_s=1, drain_s=1 if case == "time" else 10)
    if case == "left":
        raw["crowd"]["availability_trace"] = _trace_file(
            tmp_path, [("toy-0", 0.5, None), ("toy-1", 0.5, None)]
        )
    if case == "too big":
        raw["crowd"]["availability_trace"] = _trace_file(tmp_path, [("big", 0.5, None)])
    (row,) = simulate(raw).rows
    return row.status


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("left", "no phone connected (0 of 2 with an empty battery)"),
        ("battery", "no phone connected (2 of 2 with an empty battery)"),
        ("too big", "stage s1 did not fit any connected phone's RAM"),
        ("time", "not finished by horizon_s + drain_s"),
    ],
)
def test_an_unfinished_job_says_why(tmp_path: Path, case: str, reason: str) -> None:
    """Phones that never come back, batteries that run empty, a stage larger than every
    connected phone's session budget (the phone that held it left; a stage no class holds
    is refused up front: tests/test_scenario_errors.py), or a run that stops first: the row
    names the cause."""
    assert _unfinished_status(tmp_path, case) == f"incomplete: 0 of 2 inputs done; {reason}"


def _trace_file(folder: Path, absences: list[tuple[str, float, float | None]]) -> str:
    lines = ["device,t_leave_s,t_return_s"]
    lines += [f"{name},{leave},{'' if back is None else back}" for name, leave, back in absences]
    path = folder / "trace.csv"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


PHONES = [f"toy-{k}" for k in range(4)]

absence_plans = st.lists(
    st.lists(
        st.tuples(st.floats(0.0, 2.0), st.one_of(st.none(), st.floats(0.05, 3.0))),
        max_size=3,
    ),
    min_size=4,
    max_size=4,
)


def _absences(
    plans: list[list[tuple[float, float | None]]],
) -> list[tuple[str, float, float | None]]:
    """Absolute absences per phone; toy-0 always comes back, so the jobs can finish."""
    absences = []
    for name, plan in zip(PHONES, plans, strict=True):
        t = 0.0
        for gap, away in plan:
            if away is None and name == "toy-0":
                away = 1.0
            leave = round(t + gap, 3)
            back = None if away is None else round(leave + away, 3)
            absences.append((name, leave, back))
            if back is None:
                break
            t = back + 0.001
    return absences


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plans=absence_plans, strategy=st.sampled_from(["crowdio_streaming", "crowdio_barrier"]))
def test_every_input_completes_exactly_once_under_churn(
    tmp_path: Path, plans: list[list[tuple[float, float | None]]], strategy: str
) -> None:
    phone = toy_phone_file(tmp_path)
    stages = [{"name": f"s{k}", **STAGE} for k in range(3)]
    raw = toy_crowd(
        [{"name": "toy", "profile": phone, "count": 4}], strategy, inputs=4, stages=stages
    )
    raw["crowd"]["job"]["interarrival"] = {"kind": "constant", "value_s": 0.7}
    raw["crowd"]["horizon_s"] = 2.0  # three jobs, at 0, 0.7 and 1.4 s
    raw["crowd"]["drain_s"] = 600
    raw["crowd"]["availability_trace"] = _trace_file(tmp_path, _absences(plans))
    raw["crowd"]["schedulers"] = ["affinity"]
    scenario = Scenario.model_validate(raw)
    run = CrowdRun(strategy, "affinity", 0, scenario.network.bandwidth_mbps)
    outcome = simulate_crowd(scenario, prepare_crowd(scenario, None), run, record=True)
    assert len(outcome.jobs) == 3
    lost = len(events(outcome, "lost"))
    event(f"tasks lost to churn: {'3 or more' if lost >= 3 else lost}")
    assert_exactly_once(outcome)


def test_churn_from_renewal_processes_loses_nothing(tmp_path: Path) -> None:
    phone = toy_phone_file(tmp_path)
    availability = {
        "up": {"kind": "exponential", "mean_s": 0.8},
        "down": {"kind": "exponential", "mean_s": 0.3},
    }
    fleet = [{"name": "toy", "profile": phone, "count": 5, "availability": availability}]
    stages = [{"name": f"s{k}", **STAGE} for k in range(3)]
    raw = toy_crowd(fleet, inputs=5, stages=stages)
    raw["crowd"]["job"]["interarrival"] = {"kind": "exponential", "mean_s": 1.0}
    raw["crowd"]["horizon_s"] = 20.0
    outcome = simulate(raw)
    assert len(outcome.jobs) > 10
    assert events(outcome, "lost")  # churn did hit tasks in flight
    assert_exactly_once(outcome)


@pytest.mark.parametrize(
    ("rows", "column", "problem"),
    [
        (["toy-9,1,2"], "device", "line 2: unknown device 'toy-9'"),
        (["toy-0,1,x"], "t_return_s", "line 2: 'x' is not a number"),
        (["toy-0,2,1"], "t_return_s", "line 2: 1 is not after t_leave_s (2)"),
        (["toy-0,-1,1"], "t_leave_s", "line 2: -1 is below the minimum 0"),
        (
            ["toy-0,1,3", "toy-0,2,4"],
            "t_leave_s",
            "line 3: this absence of 'toy-0' overlaps the one on line 2",
        ),
        (
            ["toy-0,5,6", "", "toy-0,1,"],
            "t_leave_s",
            "line 2: this absence of 'toy-0' overlaps the one on line 4",
        ),
        (["toy-0,1,3,9"], None, "line 2: 4 cells, the header has 3"),  # the 9 was dropped
        (["toy-0,1"], None, "line 2: 2 cells, the header has 3"),  # was: gone for good
        (["toy-0,inf,"], "t_leave_s", "line 2: 'inf' is not a finite number"),
    ],
)
def test_bad_availability_traces_name_the_file_column_and_line(
    tmp_path: Path, rows: list[str], column: str | None, problem: str
) -> None:
    caught = _bad_trace_error(tmp_path, "device,t_leave_s,t_return_s\n" + "\n".join(rows) + "\n")
    assert caught.field == column
    assert caught.problem == problem


@pytest.mark.parametrize(
    ("text", "column", "problem"),
    [
        ("", None, "empty file; expected columns device, t_leave_s, t_return_s"),
        ("\n", None, "empty file; expected columns device, t_leave_s, t_return_s"),
        ("device,t_leave_s\n", "t_return_s", "line 1: missing column (header: device, t_leave_s)"),
    ],
    ids=["empty", "blank", "short"],
)
def test_a_trace_without_its_header_is_refused(
    tmp_path: Path, text: str, column: str | None, problem: str
) -> None:
    """An empty file was read as a trace in which no phone leaves."""
    caught = _bad_trace_error(tmp_path, text)
    assert caught.field == column
    assert caught.problem == problem


def _bad_trace_error(tmp_path: Path, text: str) -> InputError:
    phone = toy_phone_file(tmp_path)
    trace = tmp_path / "trace.csv"
    trace.write_text(text)
    raw = toy_crowd([{"name": "toy", "profile": phone, "count": 2}])
    raw["crowd"]["availability_trace"] = "trace.csv"
    scenario_path = tmp_path / "scenario.yaml"
    scenario_path.write_text(yaml.safe_dump(raw))
    with pytest.raises(InputError) as caught:
        prepare_crowd(Scenario.model_validate(raw), scenario_path)
    assert caught.value.path == str(trace)
    return caught.value


@pytest.mark.parametrize("bom", ["", "\ufeff"], ids=["plain", "byte-order-mark"])
def test_a_device_name_is_read_without_its_spaces(tmp_path: Path, bom: str) -> None:
    """' toy-0' passed the name check stripped but was filed unstripped: never replayed. A
    byte-order mark (a spreadsheet's UTF-8 export) was read into the first column's name:
    'expected the columns device, t_leave_s, t_return_s' of a file that has them."""
    phone = toy_phone_file(tmp_path)
    raw = toy_crowd([{"name": "toy", "profile": phone, "count": 2}])
    trace = tmp_path / "trace.csv"
    trace.write_text(bom + "device,t_leave_s,t_return_s\n toy-0 ,1.05,\n", encoding="utf-8")
    raw["crowd"]["availability_trace"] = str(trace)
    outcome = simulate(raw)
    assert [(e.phone, e.t_s) for e in events(outcome, "lost")] == [("toy-0", 1.05)]


def test_a_missing_trace_file_is_named(tmp_path: Path) -> None:
    phone = toy_phone_file(tmp_path)
    raw = toy_crowd([{"name": "toy", "profile": phone, "count": 2}])
    raw["crowd"]["availability_trace"] = "nowhere.csv"
    with pytest.raises(InputError) as caught:
        prepare_crowd(Scenario.model_validate(raw), tmp_path / "scenario.yaml")
    assert caught.value.path == str(tmp_path / "scenario.yaml")  # the scenario and its field
    assert caught.value.field == "crowd.availability_trace"
    assert caught.value.problem.startswith("file not found: ")
    assert caught.value.problem.endswith("nowhere.csv")


def test_a_task_past_the_deadline_is_queued_again_and_its_phone_cut_off(
    tmp_path: Path,
) -> None:
    """A phone a thousand times slower (100 s a task) held each task it was given until it
    finished: the twin, as the real foreman, had no per-task deadline. With
    ``crowd.task_deadline_s`` a task still running then is queued again (``overdue``), its
    phone cut off (its session lost) and enrolled again at once, the same core rule as the
    real foreman's; the job ends long before the slow phone would have."""
    fast = toy_phone_file(tmp_path, "fast")
    slow = toy_phone_file(tmp_path, "slow", cpu_gflops=0.001)
    fleet = [
        {"name": "fast", "profile": fast, "count": 1},
        {"name": "slow", "profile": slow, "count": 1},
    ]
    held = simulate(toy_crowd(fleet), scheduler="fifo")
    assert held.rows[0].tasks_redispatched == 0
    assert {e.phone for e in events(held, "done")} == {"fast", "slow"}
    raw = toy_crowd(fleet)
    raw["crowd"]["task_deadline_s"] = 5
    outcome = simulate(raw, scheduler="fifo")
    cuts = events(outcome, "cut_off")
    assert cuts and {e.phone for e in cuts} == {"slow"}
    overdue = events(outcome, "overdue")
    assert [(e.phone, e.job, e.item, e.stage) for e in overdue] == [
        (e.phone, e.job, e.item, e.stage) for e in cuts
    ]
    for cut in cuts:  # at the deadline after the attempt's dispatch, to the millisecond
        given = [e for e in events(outcome, "assign") if e.phone == "slow" and e.t_s <= cut.t_s]
        assert cut.t_s - given[-1].t_s == pytest.approx(5.0)
    assert {e.phone for e in events(outcome, "done")} == {"fast"}
    assert outcome.rows[0].tasks_redispatched == len(cuts)
    assert outcome.rows[0].total_ms < held.rows[0].total_ms / 5
    assert_exactly_once(outcome)


def test_the_counts_add_up_when_batteries_empty_and_jobs_are_left_unfinished() -> None:
    """Churn, batteries that empty and jobs the run ends on: one row per job submitted
    before the horizon, an unfinished job's status counts the inputs it finished, and
    the phones' own summaries (tasks done, loads) add up to the jobs', phones that left
    and came back included."""
    path = REPO / "scenarios/crowd_city.yaml"
    churn = "{up: {kind: exponential, mean_s: 300}, down: {kind: exponential, mean_s: 100}}"
    fleet = [
        setting
        for k in range(3)
        for setting in (
            f"crowd.fleet.{k}.battery_start_pct=[0.5, 5]",
            f"crowd.fleet.{k}.availability={churn}",
        )
    ]
    scenario = load_scenario(
        path,
        [*fleet, "crowd.fleet_size=15", "crowd.horizon_s=1800", "crowd.drain_s=100"],
    )
    run = crowd_runs(scenario)[0]
    outcome = simulate_crowd(scenario, prepare_crowd(scenario, path), run)
    assert len(outcome.jobs) == len(outcome.rows) == 1800 // 30  # a job every 30 s
    finished = [job for job in outcome.jobs if job.finished]
    assert 0 < len(finished) < len(outcome.jobs)
    assert any(summary.battery_empty for summary in outcome.phones)
    for job, row in zip(outcome.jobs, outcome.rows, strict=True):
        done = sum(job.core.done_per_stage)
        if job.finished:
            assert row.status == "ok" and done == job.spec.inputs * job.stages
        else:
            assert row.status.startswith(f"incomplete: {job.items_done} of 5 inputs done; ")
            assert done < job.spec.inputs * job.stages
    tasks = sum(sum(job.core.done_per_stage) for job in outcome.jobs)
    assert sum(summary.tasks_done for summary in outcome.phones) == tasks
    loads = sum(job.cold_loads + job.warm_loads for job in outcome.jobs)
    assert sum(s.cold_loads + s.warm_loads for s in outcome.phones) == loads
