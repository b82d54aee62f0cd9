"""Worker liveness: the silence rule (pure), and a worker gone silent on loopback (SIGSTOP)
declared lost, its task re-dispatched, every input done once; back (SIGCONT), it enrols
as a fresh worker and nothing it did before counts twice."""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Iterator

import numpy as np
import psutil
import pytest

from edgetwin.emu.crowdio.launcher import KillPlan, run_pipeline_local
from edgetwin.emu.crowdio.liveness import LivenessRule, SilenceWatch
from edgetwin.emu.crowdio.model import TINY, distilbert_job, reference_logits


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


def test_a_worker_silent_past_the_timeout_is_lost_once() -> None:
    clock = FakeClock()
    watch = SilenceWatch(LivenessRule(heartbeat_s=1.0, silence_timeout_s=4.0), clock)
    watch.heard("a")
    watch.heard("b")
    for _ in range(4):  # b beats every second, a never again
        clock.now_s += 1.0
        watch.heard("b")
        assert watch.silent() == []
    clock.now_s += 1.0
    watch.heard("b")
    assert watch.silent() == [("a", 5.0)]
    clock.now_s += 1.0
    assert watch.silent() == []  # a is forgotten; b was heard a second ago


def test_the_foremans_own_pause_is_not_held_against_workers() -> None:
    clock = FakeClock()
    watch = SilenceWatch(LivenessRule(heartbeat_s=1.0, silence_timeout_s=4.0), clock)
    watch.heard("a")
    clock.now_s += 1.0
    assert watch.silent() == []
    clock.now_s += 10.0  # the foreman's loop was blocked: no check, no frame read
    assert watch.silent() == []
    # but one still silent after it is lost: 2 s before the pause and 3 checks after
    for _ in range(2):
        clock.now_s += 1.0
        assert watch.silent() == []
    clock.now_s += 1.0
    assert watch.silent() == [("a", 5.0)]


@pytest.mark.parametrize(("heartbeat_s", "timeout_s"), [(0.0, 5.0), (1.0, 1.5)])
def test_a_rule_that_would_lose_live_workers_is_refused(
    heartbeat_s: float, timeout_s: float
) -> None:
    with pytest.raises(ValueError, match="heartbeat_s"):
        LivenessRule(heartbeat_s, timeout_s)


@pytest.fixture
def no_process_left_behind() -> Iterator[None]:
    yield
    deadline = time.monotonic() + 5
    while (children := psutil.Process().children(recursive=True)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert children == [], f"processes left behind: {children}"


@pytest.mark.usefixtures("no_process_left_behind")
def test_a_silent_worker_is_lost_and_comes_back_as_a_fresh_one() -> None:
    inputs, stages = 10, 3
    job = distilbert_job(TINY, inputs=inputs, stages=stages, mode="streaming", seed=5)
    rule = LivenessRule(heartbeat_s=0.2, silence_timeout_s=1.0)
    stop = KillPlan(stage_index=1, after_s=0.1, signum=signal.SIGSTOP, cont_after_s=2.0)
    summary = run_pipeline_local(job, workers=3, task_delay_ms=300.0, kill=stop, liveness=rule)
    # every (input, stage) completed once, the result that of the whole model
    done = Counter((e.input_index, e.stage_index) for e in summary.events if e.kind == "complete")
    assert done == Counter({(i, s): 1 for i in range(inputs) for s in range(stages)})
    assert len(summary.tasks) == inputs * stages
    expected = reference_logits(TINY, job.seed, job.inputs)
    np.testing.assert_allclose(np.array(summary.logits), expected, atol=1e-5)
    # the stopped worker: declared lost once silent for the timeout, its task re-dispatched
    first_stage_1 = next(e for e in summary.events if e.kind == "dispatch" and e.stage_index == 1)
    victim = str(first_stage_1.worker)
    (lost,) = [e for e in summary.events if e.kind == "disconnect"]
    assert lost.worker == victim and lost.detail is not None and "silent for" in lost.detail
    assert lost.t_ms - first_stage_1.t_ms > 100 + rule.silence_timeout_s * 1e3
    assert summary.tasks_redispatched >= 1
    requeued = {(e.input_index, e.stage_index) for e in summary.events if e.kind == "requeue"}
    assert (first_stage_1.input_index, 1) in requeued
    # nothing it finished after it was lost counts; it came back under a fresh id
    assert all(t.done_ms < lost.t_ms for t in summary.tasks if t.worker == victim)
    by_name = {w.worker: w for w in summary.workers}
    assert by_name[victim].disconnected
    assert not by_name[f"{victim}.2"].disconnected
    assert any(e.kind == "dispatch" and e.worker == f"{victim}.2" for e in summary.events)
