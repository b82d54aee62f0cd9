"""Worker liveness: the silence rule (pure; a worker gone silent on loopback is in
``test_crowdio_pipeline.py``)."""

from __future__ import annotations

import pytest

from edgetwin.emu.crowdio.liveness import LivenessRule, SilenceWatch


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


def test_a_task_deadline_is_looked_for_four_times_within_it() -> None:
    assert LivenessRule(1.0, 4.0).check_every_s == 1.0
    assert LivenessRule(1.0, 4.0, task_deadline_s=2.0).check_every_s == 0.5
    with pytest.raises(ValueError, match="task_deadline_s"):
        LivenessRule(1.0, 4.0, task_deadline_s=0.0)
