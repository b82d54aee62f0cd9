"""The twin and the real foreman take the same decisions, in the same order, at the same times.

Both run the one decision core (``edgetwin.models.crowd``); around it the twin has
SimPy phones and the real foreman its crew (``edgetwin.emu.crowdio.crew``: the code
between its sockets and the core), here driven by simulated workers with the twin's
durations (``tests/crowd_foreman_replay.py``). Every decision (submission, broadcast,
assignment, release, JIT load, completion, requeue) is compared with its time: the
broadcast with a task for every phone while it loads, affinity tiers seen through
queued loads, JIT loads of released stages, phones leaving mid-task (their task is
requeued in its original order) and several jobs in flight at once. Each task's
``load_ms`` (the part of its phone's last load after the task was ready) is compared
too.

Toy phones: every transfer takes 20 ms (10 ms per message, 100 bytes at 10
bytes/ms on a dedicated link), inference is GFLOPs / speed, every stage is
cached (warm loads). Free RAM differs by phone, so the health score orders
them whatever their battery has drained.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from edgetwin.emu.crowdio.records import Mode
from edgetwin.sim.crowd.foreman import trace_name
from tests.crowd_foreman_replay import ReplayWorker, replay_foreman
from tests.test_crowd_events import STAGE, simulate, toy_crowd, toy_phone_file

TRANSFERS_MS = 40.0  # the task's input in and its result out
DECISIONS = {"submit", "assign", "release", "done", "broadcast", "deferred_load", "lost"}


def _fleet(tmp_path: Path, loads_s: list[float], speeds: list[float]) -> list[dict[str, object]]:
    fleet = []
    for k, (load_s, speed) in enumerate(zip(loads_s, speeds, strict=True)):
        profile = toy_phone_file(
            tmp_path,
            f"p{k}",
            ram_mb=3000 - 300 * k,
            cpu_gflops=speed,
            session__floor_s=load_s,
        )
        fleet.append({"name": f"p{k}", "profile": profile, "count": 1})
    return fleet


Row = tuple[float, str, str, int | None, int | None, str | None]


def _compare(
    tmp_path: Path,
    mode: Mode,
    loads_s: list[float],
    speeds: list[float],
    inputs: int,
    stages: int,
    leave_s: dict[int, float],
    jobs: int,
    gap_s: float,
) -> list[Row]:
    job_stages = [{"name": f"cell_{chr(ord('a') + s)}", **STAGE} for s in range(stages)]
    raw = toy_crowd(
        _fleet(tmp_path, loads_s, speeds), f"crowdio_{mode}", inputs=inputs, stages=job_stages
    )
    if jobs > 1:
        raw["crowd"]["job"]["interarrival"] = {"kind": "constant", "value_s": gap_s}
        raw["crowd"]["horizon_s"] = gap_s * (jobs - 1) + gap_s / 2
    if leave_s:
        trace = tmp_path / "away.csv"
        lines = [f"p{k},{t},\n" for k, t in leave_s.items()]
        trace.write_text("device,t_leave_s,t_return_s\n" + "".join(lines))
        raw["crowd"]["availability_trace"] = str(trace)
    outcome = simulate(raw)
    assert len(outcome.jobs) == jobs and all(job.finished for job in outcome.jobs)
    twin = [
        (round(e.t_s * 1e3, 6), e.phone, e.event, e.job, e.item, e.stage)
        for e in outcome.recorder.events
        if e.event in DECISIONS
    ]
    inference_ms = [STAGE["gflops"] * 1e3 / speed for speed in speeds]
    workers = [
        ReplayWorker(
            f"p{k}",
            loads_s[k] * 1e3,
            (TRANSFERS_MS + inference_ms[k],) * stages,
            2000 - 300 * k,
            None if k not in leave_s else leave_s[k] * 1e3,
        )
        for k in range(len(loads_s))
    ]
    decisions, real_loads = replay_foreman(
        workers, stages, inputs, mode, [k * gap_s * 1e3 for k in range(jobs)]
    )
    real = [
        (round(t_ms, 6), *named, d.job, d.item, d.stage)
        for t_ms, d in decisions
        if (named := trace_name(d)) is not None
    ]
    assert sorted(real, key=_order) == sorted(twin, key=_order)  # ties: any order
    twin_loads = {
        (job.job_id, t.item, t.stage_index): t.load_ms
        for job in outcome.jobs
        for row in job.core.tasks
        for t in row
    }
    assert twin_loads == pytest.approx(real_loads)
    return twin


def _order(row: Row) -> tuple[float, str, str, int, int, str]:
    return (row[0], row[1], row[2], row[3] or -1, -1 if row[4] is None else row[4], row[5] or "")


@pytest.mark.parametrize("mode", ["streaming", "barrier"])
@pytest.mark.parametrize(
    ("loads_s", "speeds", "inputs", "stages"),
    [
        ([1.9, 1.7, 1.3, 1.1, 0.9], [0.5, 0.6, 1.0, 1.1, 2.0], 5, 3),  # like the reference
        ([1.5, 1.0, 0.6], [0.4, 1.0, 2.5], 7, 4),  # more inputs than phones
        ([0.3, 2.0, 1.2, 0.8], [3.0, 0.5, 1.0, 1.5], 3, 6),  # more phones than inputs
    ],
)
def test_the_twin_schedules_as_the_real_foreman(
    tmp_path: Path,
    mode: Mode,
    loads_s: list[float],
    speeds: list[float],
    inputs: int,
    stages: int,
) -> None:
    _compare(tmp_path, mode, loads_s, speeds, inputs, stages, {}, 1, 0.0)


@pytest.mark.parametrize("mode", ["streaming", "barrier"])
def test_churn_requeue_and_several_jobs_in_flight(tmp_path: Path, mode: Mode) -> None:
    # 3 jobs 0.8 s apart on 4 phones; p1 leaves at 2.3 s and p3 at 3.05 s, mid-task
    rows = _compare(
        tmp_path,
        mode,
        [0.6, 0.5, 0.4, 0.3],
        [0.8, 1.0, 1.6, 2.0],
        4,
        3,
        {1: 2.3, 3: 3.05},
        3,
        0.8,
    )
    lost = [r for r in rows if r[2] == "lost"]
    assert {r[1] for r in lost} == {"p1", "p3"}  # both lost a task in flight
    jobs_at = {r[3]: r[0] for r in rows if r[2] == "submit"}
    first_done = max(r[0] for r in rows if r[2] == "done" and r[3] == 0)
    assert jobs_at[1] < first_done and jobs_at[2] < first_done  # several jobs in flight
    for _, phone, _, job, item, stage in lost:  # the lost task runs again, elsewhere
        again = [r for r in rows if r[2] == "assign" and r[3:] == (job, item, stage)]
        assert len(again) == 2 and again[-1][1] != phone
