"""Which idle workers a scheduler is shown for a task: indexes instead of a scan.

Showing a scheduler every idle worker costs O(workers) per decision; these
indexes show it a short list that holds the worker it would have picked from
all of them (a test checks this for every registered scheduler):

- a ranked scheduler (one with ``rank``): per stage, a heap by its rank; the
  top is the one it picks. A worker that changed is ranked for a stage when
  that stage is next asked for, not at each change (most change again first);
- a uniform one (``uniform = True``): per stage, the eligible workers in an
  array, one drawn in O(1);
- any other: every idle worker not banned from the stage, in join order.

``HeldGroups`` keeps idle workers by the stage they hold, in join order, for
the broadcast and the JIT rule. Heaps are lazy: an entry is valid while its
worker's ``version`` is the one it was pushed with and the worker is available.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from edgetwin.models.crowd.views import Scheduler, TaskView, WorkerView, fits, session_fits
from edgetwin.models.crowd.workers import Worker

Entry = tuple[Any, ...]  # (*key, version, worker id): a flat tuple compares fastest


def _valid(workers: dict[str, Worker], entry: Entry) -> bool:
    """An entry stands while its worker is known, of the version it was pushed with, idle."""
    worker = workers.get(entry[-1])  # ``available`` inlined: this runs for every heap entry
    return (
        worker is not None
        and worker.version == entry[-2]
        and worker.connected
        and worker.task is None
    )


def eligible(worker: Worker, stage: TaskView) -> bool:
    """Available, not banned from the stage, and the stage fits."""
    assert worker.view is not None
    return worker.available and stage.stage not in worker.banned and fits(stage, worker.view)


class CandidateIndex:
    """Idle workers, kept ready for one scheduler's decisions; subclasses pick the short list."""

    shows_the_pick = False  # whether a non-empty short list is one worker: the scheduler's pick

    def __init__(self, workers: dict[str, Worker]) -> None:
        self.workers = workers
        self.stages: list[TaskView] = []
        self.stage_views: dict[str, TaskView] = {}  # by stage key
        self.available: set[str] = set()

    def add_stage(self, stage: TaskView) -> None:
        self.stages.append(stage)
        self.stage_views[stage.stage] = stage
        for worker in sorted(
            (self.workers[n] for n in self.available), key=lambda w: w.joined_order
        ):
            self._add(worker, [stage])

    def update(self, worker: Worker) -> None:
        """``worker`` changed (its view, or it became busy, idle, gone or back)."""
        if worker.available:
            self.available.add(worker.worker_id)
            self._add(worker, self.stages)
        else:
            self.available.discard(worker.worker_id)

    def _add(self, worker: Worker, stages: list[TaskView]) -> None:
        """Index an available worker under its new version."""

    def valid(self, entry: Entry) -> bool:
        return _valid(self.workers, entry)

    def shortlist(self, task: TaskView, rng: np.random.Generator) -> list[WorkerView]:
        """The workers the scheduler is shown for ``task``."""
        chosen = sorted(self.available, key=lambda n: self.workers[n].joined_order)
        return [w.view for n in chosen if eligible(w := self.workers[n], task) and w.view]


class RankedIndex(CandidateIndex):
    """Per stage, a lazy min-heap by the scheduler's rank; the top is its pick.

    A changed worker is ranked for a stage only when that stage's short list is
    next asked for (most workers change again, or become busy, before then): the
    rank is a function of the worker's view, which does not change until its next
    version, so the heap's top is the one an eager index would have.
    """

    def __init__(
        self, workers: dict[str, Worker], rank: Callable[[TaskView, WorkerView], Any]
    ) -> None:
        super().__init__(workers)
        self.rank = rank
        self.heaps: dict[str, list[Entry]] = {}
        self.changed: dict[str, dict[str, None]] = {}  # per stage: workers to rank, in order

    shows_the_pick = True  # the top of the heap is the fitting worker of smallest rank

    def add_stage(self, stage: TaskView) -> None:
        self.changed[stage.stage] = {}
        self.heaps[stage.stage] = []
        super().add_stage(stage)

    def _add(self, worker: Worker, stages: list[TaskView]) -> None:
        worker_id, changed = worker.worker_id, self.changed
        for stage in stages:
            changed[stage.stage][worker_id] = None

    def _rank_changed(self, stage: TaskView) -> list[Entry]:
        """The stage's heap, with the workers changed since its last short list ranked in."""
        key = stage.stage
        heap, changed = self.heaps[key], self.changed[key]
        if not changed:
            return heap
        workers, rank, push = self.workers, self.rank, heapq.heappush
        for worker_id in changed:
            worker = workers.get(worker_id)
            # ``eligible`` inlined: available; not banned, and the stage fits
            if worker is None or not worker.connected or worker.task is not None:
                continue
            view = worker.view
            assert view is not None
            if key in worker.banned or not (
                view.resident_stage == key or session_fits(stage.stage_ram_mb, view.free_ram_mb)
            ):
                continue
            push(heap, (*rank(stage, view), worker.version, worker_id))
        changed.clear()
        if len(heap) > 4 * len(self.available) + 64:
            heap[:] = [e for e in heap if self.valid(e)]
            heapq.heapify(heap)
        return heap

    def shortlist(self, task: TaskView, rng: np.random.Generator) -> list[WorkerView]:
        stage = self.stage_views.get(task.stage)
        if stage is None:
            return []
        heap = self._rank_changed(stage)
        while heap:
            if self.valid(heap[0]):
                view = self.workers[heap[0][-1]].view
                return [] if view is None else [view]
            heapq.heappop(heap)
        return []


class UniformIndex(CandidateIndex):
    """Per stage, the eligible workers in an array, so one can be drawn in O(1)."""

    def __init__(self, workers: dict[str, Worker]) -> None:
        super().__init__(workers)
        self.members: dict[str, list[str]] = {}
        self.position: dict[tuple[str, str], int] = {}

    def add_stage(self, stage: TaskView) -> None:
        self.members[stage.stage] = []
        super().add_stage(stage)

    def update(self, worker: Worker) -> None:
        for stage in self.stages:
            self._discard(stage.stage, worker.worker_id)
        super().update(worker)

    def _add(self, worker: Worker, stages: list[TaskView]) -> None:
        for stage in stages:
            if eligible(worker, stage):
                members = self.members[stage.stage]
                self.position[(stage.stage, worker.worker_id)] = len(members)
                members.append(worker.worker_id)

    def _discard(self, stage: str, name: str) -> None:
        index = self.position.pop((stage, name), None)
        if index is None:
            return
        members = self.members[stage]
        last = members.pop()
        if last != name:
            members[index] = last
            self.position[(stage, last)] = index

    def shortlist(self, task: TaskView, rng: np.random.Generator) -> list[WorkerView]:
        members = self.members.get(task.stage, [])
        if not members:
            return []
        view = self.workers[members[int(rng.integers(len(members)))]].view
        return [] if view is None else [view]


def make_index(scheduler: Scheduler, workers: dict[str, Worker]) -> CandidateIndex:
    """The index ``scheduler`` allows: ranked, uniform, or the full idle list."""
    rank = getattr(scheduler, "rank", None)
    if rank is not None:
        return RankedIndex(workers, rank)
    if getattr(scheduler, "uniform", False):
        return UniformIndex(workers)
    return CandidateIndex(workers)


class HeldGroups:
    """Idle workers by the stage they hold (None: nothing), each group in join order."""

    def __init__(self, workers: dict[str, Worker]) -> None:
        self.workers = workers
        self.heaps: dict[str | None, list[Entry]] = {}

    def update(self, worker: Worker) -> None:
        if worker.available:
            heap = self.heaps.setdefault(worker.held, [])
            heapq.heappush(heap, (worker.joined_order, worker.version, worker.worker_id))
            if len(heap) > 4 * len(self.workers) + 64:
                heap[:] = [e for e in heap if self._valid(e)]
                heapq.heapify(heap)

    def _valid(self, entry: Entry) -> bool:
        return _valid(self.workers, entry)

    def visit(self, groups: Iterable[str | None], visit: Callable[[Worker], bool]) -> None:
        """Call ``visit`` on the idle workers of ``groups`` in join order, each once, until it
        returns False; workers it leaves as they were stay indexed."""
        heads: list[tuple[Entry, str | None]] = []
        for group in groups:
            self._push_head(heads, group)
        taken: list[tuple[Entry, str | None]] = []
        seen: set[str] = set()
        try:
            while heads:
                entry, group = heapq.heappop(heads)
                heap = self.heaps[group]
                while heap:  # entries pushed since (of workers already seen) may come first
                    top = heapq.heappop(heap)
                    taken.append((top, group))
                    if top == entry:
                        break
                self._push_head(heads, group)
                if entry[-1] not in seen:
                    seen.add(entry[-1])
                    if not visit(self.workers[entry[-1]]):
                        return
        finally:
            for entry, group in taken:
                if self._valid(entry):
                    heapq.heappush(self.heaps[group], entry)

    def _push_head(self, heads: list[tuple[Entry, str | None]], group: str | None) -> None:
        heap = self.heaps.get(group)
        while heap and not self._valid(heap[0]):
            heapq.heappop(heap)
        if heap:
            heapq.heappush(heads, (heap[0], group))
