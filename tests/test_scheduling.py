"""Scheduling policies: the affinity tiers and the baselines."""

from __future__ import annotations

import numpy as np
import pytest

from edgetwin.policies.scheduling import (
    SCHEDULERS,
    TaskView,
    Tier,
    WorkerView,
    make_scheduler,
    tier,
)

TASK = TaskView(task_id="j0/i0/cell_b", stage="cell_b", stage_ram_mb=40)


def worker(
    wid: str,
    order: int,
    resident: str | None = None,
    cached: tuple[str, ...] = (),
    free_ram_mb: float = 1000,
    success: float = 1.0,
    done: int = 0,
) -> WorkerView:
    return WorkerView(
        wid, resident, frozenset(cached), free_ram_mb, 80.0, success, False, done, order
    )


def test_tiers_in_order() -> None:
    assert tier(TASK, worker("a", 0, resident="cell_b")) is Tier.RESIDENT
    assert tier(TASK, worker("a", 0, resident="cell_a", cached=("cell_b",))) is Tier.CACHED
    assert tier(TASK, worker("a", 0)) is Tier.IDLE
    assert tier(TASK, worker("a", 0, resident="cell_a")) is Tier.EVICT


def test_affinity_prefers_lower_tiers_whatever_the_join_order() -> None:
    rng = np.random.default_rng(0)
    affinity = make_scheduler("affinity")
    evict, idle = worker("evict", 0, resident="cell_a"), worker("idle", 1)
    cached = worker("cached", 2, resident="cell_c", cached=("cell_b",))
    resident = worker("resident", 3, resident="cell_b")
    pool = [evict, idle, cached, resident]
    picks = []
    while pool:
        choice = affinity.choose(TASK, pool, rng)
        picks.append(choice)
        pool = [w for w in pool if w.worker_id != choice]
    assert picks == ["resident", "cached", "idle", "evict"]


def test_affinity_breaks_ties_by_health() -> None:
    rng = np.random.default_rng(0)
    flaky, solid = worker("flaky", 0, success=0.5), worker("solid", 1, success=1.0)
    assert make_scheduler("affinity").choose(TASK, [flaky, solid], rng) == "solid"


def test_baselines() -> None:
    rng = np.random.default_rng(0)
    pool = [worker("b", 1, done=0), worker("a", 0, done=5), worker("c", 2, done=1)]
    assert make_scheduler("fifo").choose(TASK, pool, rng) == "a"
    assert make_scheduler("least_loaded").choose(TASK, pool, rng) == "b"
    picks = {make_scheduler("random").choose(TASK, pool, rng) for _ in range(50)}
    assert picks == {"a", "b", "c"}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_no_worker_with_room_means_wait(name: str) -> None:
    full = worker("full", 0, free_ram_mb=10)
    assert make_scheduler(name).choose(TASK, [full], np.random.default_rng(0)) is None
    assert make_scheduler(name).choose(TASK, [], np.random.default_rng(0)) is None


def test_unknown_scheduler_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="affinity"):
        make_scheduler("clever")
