"""The twin's foreman takes the real foreman's decisions, task by task.

The real foreman's ``Job`` (``edgetwin.emu.crowdio``) is driven by simulated
workers that take the twin's durations (``tests/crowd_foreman_replay.py``);
the twin runs the same fleet and job. Which phone runs each task, and when it
finishes, must be the same: the broadcast of the first stage with a task for
every phone while it loads, the affinity tiers seen through queued loads, and
the JIT loads of released stages on phones left without work.

Toy phones: every transfer takes 20 ms (10 ms per message, 100 bytes at 10
bytes/ms on a dedicated link), inference is GFLOPs / speed, every stage is
cached (warm loads). Free RAM differs by phone, so the health score orders
them whatever their battery has drained.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from edgetwin.emu.crowdio.records import Mode
from tests.crowd_foreman_replay import ReplayWorker, replay_foreman
from tests.test_crowd_events import STAGE, simulate, toy_crowd, toy_phone_file

TRANSFERS_MS = 40.0  # the task's input in and its result out


def _fleet(tmp_path: Path, loads_s: list[float], speeds: list[float]) -> list[dict[str, object]]:
    fleet = []
    for k, (load_s, speed) in enumerate(zip(loads_s, speeds, strict=True)):
        profile = toy_phone_file(
            tmp_path,
            f"p{k}",
            ram_mb=3000 - 300 * k,
            cpu_gflops=speed,
            session__warm_load_s=load_s,
        )
        fleet.append({"name": f"p{k}", "profile": profile, "count": 1})
    return fleet


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
    job_stages = [{"name": f"cell_{chr(ord('a') + s)}", **STAGE} for s in range(stages)]
    raw = toy_crowd(
        _fleet(tmp_path, loads_s, speeds), f"crowdio_{mode}", inputs=inputs, stages=job_stages
    )
    outcome = simulate(raw)
    twin = {
        (task.item, task.stage_index): (task.worker, task.done_ms)
        for tasks in outcome.jobs[0].tasks
        for task in tasks
    }
    inference_ms = [STAGE["gflops"] * 1e3 / speed for speed in speeds]
    workers = [
        ReplayWorker(
            f"p{k}", loads_s[k] * 1e3, (TRANSFERS_MS + inference_ms[k],) * stages, 2000 - 300 * k
        )
        for k in range(len(loads_s))
    ]
    real = replay_foreman(workers, stages, inputs, mode)
    assert {key: worker for key, (worker, _) in twin.items()} == {
        key: worker for key, (worker, _) in real.items()
    }
    for key, (_, done_ms) in twin.items():
        assert done_ms == pytest.approx(real[key][1], abs=1e-6), key
