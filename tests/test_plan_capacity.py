"""edgetwin plan, crowd capacity: how many phones keep up with a job every T s under churn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from edgetwin.cli import main
from edgetwin.errors import InputError
from edgetwin.plan.capacity import backlog, backlog_growth, describe_capacity, judge_run
from edgetwin.plan.executors import PoolExecutor, SerialExecutor
from edgetwin.plan.question_file import load_question
from edgetwin.plan.run import journal_for, run_plan, sweep_rows
from edgetwin.plan.sweep import crowd_of_size
from edgetwin.reports.plan import capacity_figures, write_plan_report
from edgetwin.results import ResultRow
from edgetwin.sim.crowd.runner import run_crowd

REPO = Path(__file__).resolve().parents[1]
CHURN = "{up: {kind: exponential, mean_s: 900}, down: {kind: exponential, mean_s: 300}}"


CAPACITY_SET = [
    "repetitions=2",
    "crowd.horizon_s=900",
    "crowd.drain_s=600",
    "crowd.cache=warm",
    "crowd.job.inputs=100",
    "crowd.job.interarrival.value_s=60",
    *(f"crowd.fleet.{i}.availability={CHURN}" for i in range(3)),
]


def capacity_question(tmp_path: Path, **changes: Any) -> Path:
    """crowd_city's mix, 100-input jobs every 60 s, 15 min of jobs, warm caches."""
    raw: dict[str, Any] = {
        "name": "capacity",
        "scenario": str(REPO / "scenarios" / "crowd_city.yaml"),
        "set": CAPACITY_SET,
        "axes": {"fleet_size": [2, 3, 6]},
        "question": {"kind": "crowd_capacity"},
    }
    raw.update(changes)
    path = tmp_path / "capacity.plan.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def job(latency_s: float | None, rep: int = 0) -> ResultRow:
    total_ms = float("nan") if latency_s is None else latency_s * 1e3
    status = "ok" if latency_s is not None else "incomplete: 0 of 5 inputs done"
    return ResultRow(
        "q", "twin", "crowdio_streaming", 3, 5, 50, None, None, rep,
        0, 0, 0, total_ms, total_ms / 5, 0, status,
    )  # fmt: skip


def test_backlog_counts_jobs_still_in_the_system() -> None:
    submitted = [0, 60, 120, 180]
    assert backlog(submitted, [50, 190, 200, 230]) == [0, 0, 1, 2]
    assert backlog(submitted, [50, float("inf"), 170, 230]) == [0, 0, 1, 1]
    assert backlog_growth([0, 1, 2, 3]) == pytest.approx(3)
    assert 0 < backlog_growth([0, 1] * 10) < 0.5  # alternating: no trend


def test_a_run_s_figures_hold_no_more_digits_than_its_table() -> None:
    """A p95 of jobs of 7-digit latencies read 33.456779999999995 s in answer.json."""
    judged = judge_run([job(12.34567), job(23.45679), job(34.56789)], 60, 0, 60)
    assert (judged["p95_s"], judged["median_s"]) == (33.45678, 23.45679)
    judged = judge_run([job(1.234567), job(2.345678)], 60, 0, 60)
    assert judged["median_s"] == 1.790122  # 1.7901224999999998


def test_each_condition_of_keeping_up_can_fail() -> None:
    steady = [job(30) for _ in range(20)]
    assert judge_run(steady, 60, 0, 60)["keeps_up"]
    assert not judge_run([*steady[:-1], job(None)], 60, 0, 60)["keeps_up"]  # unfinished
    slow = judge_run([job(30)] * 10 + [job(70)] * 10, 60, 0, 60)
    assert slow["p95_s"] == pytest.approx(70) and not slow["keeps_up"]
    noisy = judge_run([job(30), job(70)] * 10, 60, 0, 80)  # one job waits now and then
    assert noisy["max_backlog"] == 1 and not noisy["backlog_grows"] and noisy["keeps_up"]
    # jobs pile up in the second half only: p95 within a loose target, but the backlog grows
    growing = judge_run([job(30)] * 10 + [job(30 + 40 * k) for k in range(10)], 60, 0, 400)
    assert growing["p95_s"] <= 400 and growing["backlog_grows"] and not growing["keeps_up"]


def test_capacity_answer_from_the_crowd_twin(tmp_path: Path) -> None:
    loaded = load_question(capacity_question(tmp_path))
    outcome = run_plan(loaded, tmp_path / "out", SerialExecutor(), write_plan_report)
    answer = outcome.answer
    sizes = [f["fleet_size"] for f in answer["fleets"]]
    assert sizes == [2, 3, 6] and outcome.configurations == 3 * 2
    # the plan's rows are the crowd twin's own runs of each fleet size, same seeds
    for size in sizes:
        direct = run_crowd(crowd_of_size(loaded.scenario, size), loaded.scenario_path)
        assert [r for r in outcome.rows if r.devices == size] == direct
    smallest = answer["smallest_fleet"]
    assert smallest is not None and smallest > sizes[0]  # two phones cannot keep up
    for fleet in answer["fleets"]:
        assert fleet["keeps_up"] == (fleet["fleet_size"] >= smallest)
        if fleet["keeps_up"]:
            for rep in range(2):
                mine = [r for r in outcome.rows if (r.devices, r.rep) == (fleet["fleet_size"], rep)]
                assert all(r.status == "ok" for r in mine) and len(mine) == 15
                assert np.percentile([r.total_ms for r in mine], 95) <= 60_000
    page = (tmp_path / "out" / "plan.html").read_text()
    assert "p95 job latency per run" in page and "Largest backlog" in page
    latency, backlog_figure = capacity_figures(answer)  # hovers give phones, s and jobs
    assert latency.data[0].hovertemplate.startswith("%{x} phones: p95 %{y:,.4~r} s")
    assert backlog_figure.data[0].hovertemplate.startswith("%{x} phones: %{y} jobs")
    # a run that falls behind looks the same in both figures, keyed (it was blue, unkeyed)
    looks = [[(t.name, t.marker.color, t.marker.symbol) for t in fig.data[:2]]
             for fig in (latency, backlog_figure)]  # fmt: skip
    assert looks[0] == looks[1] and len({colour for _, colour, _ in looks[0]}) == 2


@pytest.mark.timeout(300)
def test_capacity_answer_per_bandwidth(tmp_path: Path) -> None:
    """Fleet sizes at each swept bandwidth: every unit is the crowd twin's own run, and a
    slower link never needs fewer phones (cold loads of 180 MB stages cross it)."""
    cold = [item for item in CAPACITY_SET if item != "crowd.cache=warm"]
    cold.append("crowd.job.inputs=10")
    axes = {"fleet_size": [2, 3, 6, 12], "bandwidth_mbps": [5, 50]}
    loaded = load_question(capacity_question(tmp_path, axes=axes, set=cold))
    outcome = run_plan(loaded, tmp_path / "out", SerialExecutor(), write_plan_report)
    assert outcome.configurations == 4 * 2 * 2  # fleet sizes x bandwidths x repetitions
    answer = outcome.answer
    assert [at["bandwidth_mbps"] for at in answer["by_bandwidth"]] == [5, 50]
    assert answer["fleets"] == answer["by_bandwidth"][0]["fleets"]  # the first, as before
    for size in axes["fleet_size"]:
        direct = run_crowd(crowd_of_size(loaded.scenario, size), loaded.scenario_path)
        planned = [r for r in outcome.rows if r.devices == size]
        assert list(map(repr, planned)) == list(map(repr, direct))  # NaN of unfinished jobs
        assert {r.bandwidth_mbps for r in direct} == {5, 50}
    slow, fast = (at["smallest_fleet"] for at in answer["by_bandwidth"])
    assert fast is not None and (slow is None or slow >= fast)
    page = (tmp_path / "out" / "plan.html").read_text()
    assert "a job every 60 s at 5 Mbit" in page and "a job every 60 s at 50 Mbit" in page


@pytest.mark.parametrize(
    ("changes", "lines"),
    [
        (
            ["repetitions=1", "crowd.job.inputs=100", "crowd.job.interarrival.value_s=60"],
            [
                "no backlog growth, in its 1 run: no swept fleet keeps up (sweep larger fleets in "
                "axes.fleet_size, or ask less: question.target_p95_s, ",
                "1 phone: 0 of 1 run keeps up, worst p95",
                "1 sweep unit (1 run now, 0 resumed) -> ",
            ],
        ),
        (
            ["repetitions=2", "crowd.job.inputs=1", "crowd.job.interarrival.value_s=600"],
            [
                "no backlog growth, in all 2 runs: 1 phone\n",
                "1 phone: 2 of 2 runs keep up, worst p95",
                "2 sweep units (2 run now, 0 resumed) -> ",
            ],
        ),
    ],
    ids=["one-run", "two-runs"],
)
def test_the_answer_of_one_phone_and_one_run_is_singular(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: list[str], lines: list[str]
) -> None:
    """It said "1 phones: 0 of 2 runs keep up", "in all 1 runs", "1 sweep units"."""
    base = ["crowd.horizon_s=900", "crowd.drain_s=600", "crowd.cache=warm"]  # no churn
    question = capacity_question(tmp_path, axes={"fleet_size": [1]}, set=[*base, *changes])
    assert main(["plan", str(question), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    printed = capsys.readouterr().out
    for line in lines:
        assert line in printed
    assert "1 phones" not in printed and "1 runs" not in printed


def _answer_with(fleet: dict[str, Any]) -> dict[str, Any]:
    """A crowd-capacity answer of one fleet at 50 Mbit/s, two runs, a 60 s target."""
    return {
        "interarrival_s": 60,
        "strategy": "crowdio_streaming",
        "scheduler": "affinity",
        "target_p95_s": 60,
        "repetitions": 2,
        "by_bandwidth": [{"bandwidth_mbps": 50, "fleets": [fleet], "smallest_fleet": None}],
    }


def test_one_run_of_several_keeps_up() -> None:
    fleet = {"fleet_size": 3, "keeps_up": False, "runs_keeping_up": 1, "runs": [{}, {}],
             "worst_p95_s": 70.0}  # fmt: skip
    result = _answer_with(fleet)
    assert describe_capacity(result)[1] == "3 phones: 1 of 2 runs keeps up, worst p95 70.0 s"


def test_a_smaller_fleet_that_keeps_up_is_named_when_the_largest_does_not() -> None:
    """Churn put the largest swept fleet behind in a run: there is no answer, but the line
    said that no swept fleet keeps up, with 6 and 8 phones keeping up in every run."""
    fleets = [
        {"fleet_size": size, "keeps_up": keeps, "runs_keeping_up": kept, "runs": [{}, {}],
         "worst_p95_s": p95}
        for size, keeps, kept, p95 in ((3, False, 0, 200.0), (6, True, 2, 40.0),
                                       (8, True, 2, 35.0), (10, False, 1, 90.0))
    ]  # fmt: skip
    result = _answer_with(fleets[0])
    result["by_bandwidth"][0]["fleets"] = fleets
    head = describe_capacity(result)[0]
    assert head.endswith(
        "in all 2 runs: no size from which every larger swept one keeps up: 6 and 8 phones "
        "keep up, but 10 phones (the largest swept) do not (sweep larger fleets in "
        "axes.fleet_size, or more repetitions)"
    )
    assert "no swept fleet keeps up" not in head


def test_a_run_that_finished_no_job_is_said_so() -> None:
    """No p95 means a run in which no job finished; the line said 'a job unfinished'."""
    runs = [judge_run([job(None), job(None)], 60, 0, 60), judge_run([job(20.0)], 60, 0, 60)]
    fleet = {"fleet_size": 2, "keeps_up": False, "runs_keeping_up": 1, "runs": runs,
             "worst_p95_s": None}  # fmt: skip
    result = _answer_with(fleet)
    assert runs[0]["p95_s"] is None and runs[1]["p95_s"] == 20.0
    line = describe_capacity(result)[1]
    assert line == "2 phones: 1 of 2 runs keeps up, no job finished in a run"


def test_crowd_sweep_is_the_same_on_a_pool(tmp_path: Path) -> None:
    loaded = load_question(capacity_question(tmp_path, axes={"fleet_size": [2, 4]}))
    serial, *_ = sweep_rows(loaded, journal_for(loaded, tmp_path / "s"), SerialExecutor())
    pooled, *_ = sweep_rows(loaded, journal_for(loaded, tmp_path / "p"), PoolExecutor(2))
    assert serial == pooled


@pytest.mark.parametrize(
    ("changes", "field", "problem"),
    [
        ({"axes": {"batch": [1], "bandwidth_mbps": [100]}}, "axes", "axes of a crowd_capacity"),
        (
            {"question": {"kind": "best_mode"}, "axes": {"fleet_size": [2]}},
            "axes",
            "axes of a best_mode",
        ),
        ({"axes": {"fleet_size": [4, 2]}}, "axes.fleet_size", "increasing"),
        # these ran: true as 1 phone or 1 Mbit/s, [] as the scenario's bandwidth
        ({"axes": {"fleet_size": [True, 2]}}, "axes.fleet_size.0", "a number, not true"),
        (
            {"axes": {"fleet_size": [2], "bandwidth_mbps": [True]}},
            "axes.bandwidth_mbps.0",
            "a number, not true",
        ),
        (
            {"axes": {"fleet_size": [2], "bandwidth_mbps": []}},
            "axes.bandwidth_mbps",
            "give at least one value",
        ),
        (
            {"question": {"kind": "crowd_capacity", "target_p95_s": True}},
            "question.target_p95_s",
            "a number, not true",
        ),
        (
            {"question": {"kind": "crowd_capacity", "scheduler": "psychic"}},
            "question.scheduler",
            "unknown scheduler",
        ),
        (
            {"set": ["crowd.job.interarrival={kind: exponential, mean_s: 60}"]},
            "crowd.job.interarrival",
            "constant",
        ),
        (
            {"axes": {"fleet_size": [2, 3], "bandwidth_mbps": [50, 10]}},
            "axes.bandwidth_mbps",
            "increasing",
        ),
        (
            {"scenario": str(REPO / "scenarios" / "crowdio_android.yaml"), "set": []},
            "crowd.fleet",
            "share",
        ),
        (
            {"scenario": str(REPO / "scenarios" / "prism_jetson.yaml"), "set": []},
            "scenario",
            "crowd scenario",
        ),
    ],
)
def test_capacity_question_errors(
    tmp_path: Path, changes: dict[str, Any], field: str, problem: str
) -> None:
    path = capacity_question(tmp_path, **changes)
    with pytest.raises(InputError, match=problem) as exc:
        load_question(path)
    assert (exc.value.path, exc.value.field) == (str(path), field)


def test_crowd_sweep_on_a_tcp_scheduler_equals_local(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed")
    question = str(capacity_question(tmp_path, axes={"fleet_size": [2, 4]}))
    local, remote = tmp_path / "local", tmp_path / "remote"
    assert main(["plan", question, "--out", str(local), "--workers", "1", "--quiet"]) == 0
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        args = ["--out", str(remote), "--scheduler", cluster.scheduler_address, "--quiet"]
        assert main(["plan", question, *args]) == 0
    for name in ("results.csv", "answer.json"):
        assert (remote / name).read_bytes() == (local / name).read_bytes(), name
