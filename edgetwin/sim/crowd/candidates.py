"""Which idle workers a scheduler is shown for a task: an index instead of a scan.

A scheduler from ``edgetwin.policies.scheduling`` picks among the workers it
is shown. Showing it every idle phone costs O(phones) per decision; these
indexes show it a short list that is guaranteed to contain the worker it
would have picked from all of them (a test checks this for every registered
scheduler):

- affinity: the best (health, join order) worker of each residency tier;
- fifo: the earliest-joined worker; least_loaded: the one with fewest tasks;
- random: one worker drawn uniformly (the scheduler then picks it).

Any other scheduler is shown every idle worker that is not banned from the
stage. Heaps are lazy: an entry is valid while its worker's ``version`` is
the one it was pushed with and the worker is available.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

import numpy as np

from edgetwin.policies.scheduling import TaskView, Tier, WorkerView, fits, health_score, tier
from edgetwin.sim.crowd.phone import Phone

HeapKey = tuple[float, ...]
TIERS = tuple(int(t) for t in Tier)  # best first


def _eligible(phone: Phone, task: TaskView) -> bool:
    return phone.available and task.stage not in phone.banned and fits(task, phone.view)


class CandidateIndex:
    """Idle phones, kept ready for one scheduler's decisions; subclasses pick the short list."""

    def __init__(self, phones: Sequence[Phone], stages: Sequence[TaskView]) -> None:
        self.phones = {phone.name: phone for phone in phones}
        self.stages = list(stages)
        self.available: set[str] = set()

    def update(self, phone: Phone) -> None:
        """``phone`` changed (its view, or it became busy, idle, gone or back)."""
        phone.version += 1
        if phone.available:
            self.available.add(phone.name)
            self._add(phone)
        else:
            self.available.discard(phone.name)

    def _add(self, phone: Phone) -> None:
        """Index an available phone under its new version."""

    def shortlist(self, task: TaskView, rng: np.random.Generator) -> list[WorkerView]:
        """The workers the scheduler is shown for ``task``."""
        return [
            phone.view
            for name in sorted(self.available, key=lambda n: self.phones[n].joined_order)
            if _eligible(phone := self.phones[name], task)
        ]


class _Heaps(CandidateIndex):
    """One lazy min-heap per (stage, group); ``_groups`` says where a phone goes."""

    def __init__(self, phones: Sequence[Phone], stages: Sequence[TaskView]) -> None:
        super().__init__(phones, stages)
        self.heaps: dict[tuple[str, int], list[tuple[HeapKey, int, str]]] = {}

    def _groups(self, phone: Phone, task: TaskView) -> tuple[int, HeapKey]:
        raise NotImplementedError

    def _add(self, phone: Phone) -> None:
        for task in self.stages:
            if _eligible(phone, task):
                group, key = self._groups(phone, task)
                heap = self.heaps.setdefault((task.stage, group), [])
                heapq.heappush(heap, (key, phone.version, phone.name))
                if len(heap) > 4 * len(self.available) + 64:
                    self._compact(heap)

    def _top(self, stage: str, group: int) -> WorkerView | None:
        heap = self.heaps.get((stage, group))
        while heap:
            _key, version, name = heap[0]
            phone = self.phones[name]
            if phone.version == version and phone.available:
                return phone.view
            heapq.heappop(heap)
        return None

    def _compact(self, heap: list[tuple[HeapKey, int, str]]) -> None:
        valid = [
            e for e in heap if self.phones[e[2]].version == e[1] and self.phones[e[2]].available
        ]
        heap[:] = valid
        heapq.heapify(heap)


class AffinityIndex(_Heaps):
    """Per stage and residency tier, the best health score first (join order breaks ties)."""

    def _groups(self, phone: Phone, task: TaskView) -> tuple[int, HeapKey]:
        view = phone.view
        return int(tier(task, view)), (-health_score(view), view.joined_order)

    def shortlist(self, task: TaskView, rng: np.random.Generator) -> list[WorkerView]:
        tops = (self._top(task.stage, t) for t in TIERS)
        return [view for view in tops if view is not None]


class FifoIndex(_Heaps):
    def _groups(self, phone: Phone, task: TaskView) -> tuple[int, HeapKey]:
        return 0, (phone.view.joined_order,)

    def shortlist(self, task: TaskView, rng: np.random.Generator) -> list[WorkerView]:
        top = self._top(task.stage, 0)
        return [] if top is None else [top]


class LeastLoadedIndex(FifoIndex):
    def _groups(self, phone: Phone, task: TaskView) -> tuple[int, HeapKey]:
        return 0, (phone.view.tasks_done, phone.view.joined_order)


class RandomIndex(CandidateIndex):
    """Per stage, the eligible phones in an array, so one can be drawn in O(1)."""

    def __init__(self, phones: Sequence[Phone], stages: Sequence[TaskView]) -> None:
        super().__init__(phones, stages)
        self.members: dict[str, list[str]] = {task.stage: [] for task in stages}
        self.position: dict[tuple[str, str], int] = {}

    def update(self, phone: Phone) -> None:
        for task in self.stages:
            self._discard(task.stage, phone.name)
        super().update(phone)

    def _add(self, phone: Phone) -> None:
        for task in self.stages:
            if _eligible(phone, task):
                self.position[(task.stage, phone.name)] = len(self.members[task.stage])
                self.members[task.stage].append(phone.name)

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
        return [self.phones[members[int(rng.integers(len(members)))]].view]


INDEXES: dict[str, Callable[[Sequence[Phone], Sequence[TaskView]], CandidateIndex]] = {
    "affinity": AffinityIndex,
    "fifo": FifoIndex,
    "least_loaded": LeastLoadedIndex,
    "random": RandomIndex,
}


def make_index(
    scheduler: str, phones: Sequence[Phone], stages: Sequence[TaskView]
) -> CandidateIndex:
    """The index for ``scheduler``; the full idle list for a scheduler it does not know."""
    return INDEXES.get(scheduler, CandidateIndex)(phones, stages)
