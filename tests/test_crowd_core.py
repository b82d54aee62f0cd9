"""The crowd decision core on its own: dependencies, requeue order, JIT, indexes.

No runtime: workers are names with fixed facts, and the test plays the runtime
(it says when a task is done, a worker leaves, a load fails).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from edgetwin.models.crowd.core import CrowdCore, Load, Order, Run
from edgetwin.models.crowd.events import Decision
from edgetwin.models.crowd.index import make_index
from edgetwin.models.crowd.table import Mode, Stage
from edgetwin.models.crowd.views import TaskView, WorkerView
from edgetwin.models.crowd.workers import Facts, Worker
from edgetwin.policies.scheduling import SCHEDULERS, make_scheduler

STAGES = [Stage(f"k{s}", f"s{s}", 10.0) for s in range(3)]


def _core(workers: int, ram_mb: float = 100.0) -> CrowdCore:
    core = CrowdCore(lambda _name: Facts(frozenset(), ram_mb, None, False))
    for k in range(workers):
        core.join(f"w{k}")
    return core


def _submit(core: CrowdCore, inputs: int, stages: int, mode: Mode) -> list[Order]:
    rng = np.random.default_rng(0)
    return core.submit("j", STAGES[:stages], inputs, mode, make_scheduler("fifo"), rng, 0.0)[1]


def _runs(orders: list[Order]) -> list[tuple[str, int, int]]:
    return [(o.worker, o.task.item, o.task.stage_index) for o in orders if isinstance(o, Run)]


def test_streaming_frees_each_input_on_its_own() -> None:
    core = _core(2)
    assert _runs(_submit(core, 2, 2, "streaming")) == [("w0", 0, 0), ("w1", 1, 0)]
    core.complete("w0", 1.0)
    assert _runs(core.dispatch(1.0)) == [("w0", 0, 1)]  # (1, 0) still running


def test_barrier_waits_for_the_whole_stage() -> None:
    core = _core(2)
    _submit(core, 2, 2, "barrier")
    core.complete("w0", 1.0)
    assert _runs(core.dispatch(1.0)) == []
    core.complete("w1", 2.0)
    assert sorted(_runs(core.dispatch(2.0))) == [("w0", 0, 1), ("w1", 1, 1)]


def test_a_requeued_task_keeps_its_original_place_in_the_queue() -> None:
    core = _core(1)
    assert _runs(_submit(core, 3, 1, "streaming")) == [("w0", 0, 0)]
    core.leave("w0")
    task = core.requeue("w0", "lost")
    assert task.job.requeued == 1 and task.worker is None
    core.join("w1")
    assert _runs(core.dispatch(1.0)) == [("w1", 0, 0)]  # before (1, 0) and (2, 0), as before
    core.complete("w1", 2.0)
    assert _runs(core.dispatch(2.0)) == [("w1", 1, 0)]


def test_a_forgotten_worker_leaves_nothing_behind_in_the_indexes() -> None:
    core = _core(2)
    assert _runs(_submit(core, 3, 2, "streaming")) == [("w0", 0, 0), ("w1", 1, 0)]
    core.leave("w0")
    core.requeue("w0", "lost")
    core.forget("w0")  # as the real foreman does: a worker that comes back is a new one
    core.complete("w1", 1.0)
    assert _runs(core.dispatch(1.0)) == [("w1", 0, 0)]  # the requeued task, oldest first
    assert "w0" not in core.workers and core.idle == set()


def test_a_task_past_its_deadline_goes_back_and_its_worker_leaves() -> None:
    """A worker that keeps its heartbeat but never answers (a hung inference) held its task
    for ever: the core requeued a task only when its worker left. With a per-task deadline
    the task is overdue that long after its dispatch: the worker leaves, the task is queued
    again in its place, and the next worker free takes it."""
    decisions: list[Decision] = []
    core = CrowdCore(lambda _: Facts(frozenset(), 100.0, None, False), decisions.append, 500.0)
    for k in range(2):
        core.join(f"w{k}")
    rng = np.random.default_rng(0)
    _, orders = core.submit("j", STAGES[:1], 3, "streaming", make_scheduler("fifo"), rng, 0.0)
    assert _runs(orders) == [("w0", 0, 0), ("w1", 1, 0)]
    running = core.workers["w0"].task
    assert running is not None and core.due_ms(running) == 500.0
    core.complete("w1", 100.0)
    assert _runs(core.dispatch(100.0)) == [("w1", 2, 0)]  # dispatched at 100 ms
    assert core.expire(499.0) == []
    assert core.expire(500.0) == ["w0"]  # w1's task is due at 600 ms
    requeue = decisions[-1]
    assert (requeue.kind, requeue.worker, requeue.item, requeue.detail) == (
        "requeue",
        "w0",
        0,
        "overdue",
    )
    assert not core.workers["w0"].connected and core.workers["w0"].task is None
    assert _runs(core.dispatch(500.0)) == []  # w1 is busy, w0 gone
    core.complete("w1", 550.0)
    assert _runs(core.dispatch(550.0)) == [("w1", 0, 0)]
    core.join("w0")  # it enrols again, holding nothing: a worker like any other
    assert core.expire(1000.0) == []  # w1's retry is due at 1050 ms
    assert core.expire(1050.0) == ["w1"]


def test_without_a_deadline_no_task_is_ever_overdue() -> None:
    core = _core(1)
    (task,) = [o.task for o in _submit(core, 1, 1, "streaming") if isinstance(o, Run)]
    assert core.due_ms(task) is None and core.expire(1e12) == []
    assert core.workers["w0"].task is task


def test_broadcast_and_jit_load_a_released_stage_on_an_idle_worker() -> None:
    core = _core(3)
    orders = _submit(core, 2, 2, "barrier")
    broadcast = [o.worker for o in orders if isinstance(o, Load) and o.why == "broadcast"]
    assert broadcast == ["w0", "w1", "w2"]
    assert not [o for o in orders if isinstance(o, Load) and o.why == "deferred_load"]
    core.complete("w0", 1.0)  # releases s1, with 2 tasks and no holder; s0 has no task left
    jit = [(o.worker, o.stage.name) for o in core.dispatch(1.0) if isinstance(o, Load)]
    assert jit == [("w0", "s1"), ("w2", "s1")]  # idle ones, in join order; w1 is busy


def test_a_worker_whose_load_did_not_fit_is_not_offered_the_stage_again() -> None:
    core = _core(2)
    _submit(core, 1, 1, "streaming")
    core.load_failed("w0", "k0", lasting=True)
    core.requeue("w0", "rescheduled")
    assert _runs(core.dispatch(1.0)) == [("w1", 0, 0)]


def test_several_jobs_share_one_queue_oldest_first() -> None:
    core = _core(1)
    _submit(core, 1, 1, "streaming")
    second = _submit(core, 1, 1, "streaming")
    assert _runs(second) == []
    core.complete("w0", 1.0)
    assert [(o.task.job.job_id, o.worker) for o in core.dispatch(1.0) if isinstance(o, Run)] == [
        (1, "w0")
    ]
    assert len(core.in_flight) == 1


views = st.builds(
    lambda resident, cached, ram, battery, success, gpu, done: (
        resident,
        frozenset(cached),
        ram,
        battery,
        success,
        gpu,
        done,
    ),
    st.sampled_from([None, "a", "b", "c"]),
    st.sets(st.sampled_from(["a", "b", "c"])),
    st.sampled_from([5.0, 50.0, 500.0, 5000.0]),
    st.sampled_from([None, 10.0, 50.0, 90.0]),
    st.sampled_from([0.5, 0.9, 1.0]),
    st.booleans(),
    st.integers(0, 5),
)


def _workers(fields: list[tuple[tuple[Any, ...], bool]]) -> dict[str, Worker]:
    workers = {}
    for i, (f, busy) in enumerate(fields):
        worker = Worker(f"w{i}", i, connected=not busy)
        worker.view = WorkerView(f"w{i}", *f[:5], f[5], f[6], joined_order=i)
        workers[worker.worker_id] = worker
    return workers


@settings(max_examples=200, deadline=None)
@given(
    fields=st.lists(st.tuples(views, st.booleans()), min_size=1, max_size=12),
    stage=st.sampled_from(["a", "b", "c"]),
    name=st.sampled_from(sorted(SCHEDULERS)),
)
def test_shortlists_contain_the_schedulers_choice(
    fields: list[tuple[tuple[Any, ...], bool]], stage: str, name: str
) -> None:
    workers = _workers(fields)
    scheduler = make_scheduler(name)
    index = make_index(scheduler, workers)
    stages = [TaskView(s, s, 40.0) for s in ("a", "b", "c")]
    for view in stages:
        index.add_stage(view)
    for worker in workers.values():
        index.update(worker)
    task = stages[["a", "b", "c"].index(stage)]
    everyone = [w.view for w in workers.values() if w.available and w.view is not None]
    shown = index.shortlist(task, np.random.default_rng(0))
    choice = scheduler.choose(task, shown, np.random.default_rng(1)) if shown else None
    full = scheduler.choose(task, everyone, np.random.default_rng(1))
    if name == "random":  # same support: a uniform draw among the eligible
        assert (choice is None) == (full is None)
        if choice is not None:
            assert choice in {w.worker_id for w in everyone}
    else:
        assert choice == full


@settings(max_examples=200, deadline=None)
@given(
    start=st.lists(st.tuples(views, st.booleans()), min_size=1, max_size=8),
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("change"), st.integers(0, 7), views, st.booleans()),
            st.tuples(st.just("ask"), st.sampled_from(["a", "b", "c"])),
        ),
        max_size=30,
    ),
    name=st.sampled_from(sorted(SCHEDULERS)),
)
def test_an_index_kept_through_changes_shows_the_schedulers_choice(
    start: list[tuple[tuple[Any, ...], bool]], steps: list[tuple[Any, ...]], name: str
) -> None:
    """Workers change (views, busy or idle) between questions; the index, ranking changed
    workers only when a stage is asked for, still shows what a scan of everyone picks."""
    workers = _workers(start)
    scheduler = make_scheduler(name)
    index = make_index(scheduler, workers)
    stages = {s: TaskView(s, s, 40.0) for s in ("a", "b", "c")}
    for view in stages.values():
        index.add_stage(view)
    for worker in workers.values():
        index.update(worker)
    for step in steps:
        if step[0] == "change":
            _, k, f, busy = step
            worker = workers[f"w{k % len(workers)}"]
            worker.version += 1
            worker.connected = not busy
            worker.view = WorkerView(worker.worker_id, *f[:5], f[5], f[6], worker.joined_order)
            index.update(worker)
            continue
        task = stages[step[1]]
        everyone = [w.view for w in workers.values() if w.available and w.view is not None]
        shown = index.shortlist(task, np.random.default_rng(0))
        choice = scheduler.choose(task, shown, np.random.default_rng(1)) if shown else None
        full = scheduler.choose(task, everyone, np.random.default_rng(1))
        if name == "random":
            assert (choice is None) == (full is None)
        else:
            assert choice == full
        if index.shows_the_pick:
            assert len(shown) <= 1


class _SomeoneElses:
    name = "someone_elses"

    def choose(self, task: TaskView, available: Any, rng: np.random.Generator) -> str | None:
        return None


def test_an_unknown_scheduler_is_shown_every_idle_worker() -> None:
    view = (None, frozenset(), 100.0, None, 1.0, False, 0)
    workers = _workers([(view, False), (view, True), (view, False)])
    index = make_index(_SomeoneElses(), workers)
    index.add_stage(TaskView("a", "a", 1.0))
    for worker in workers.values():
        index.update(worker)
    shown = index.shortlist(TaskView("t", "a", 1.0), np.random.default_rng(0))
    assert [w.worker_id for w in shown] == ["w0", "w2"]
