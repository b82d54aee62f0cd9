"""Task records and the dependency manager: N inputs x S stages, streaming or barrier.

Task (i, s) runs stage s on input i. Its input payload is injected when (i, s-1)
completes (stage 0 gets the job's input i). It becomes ready, and joins the ready
queue, when its dependencies are met: in streaming mode (i, s-1) alone, in barrier
mode every task of stage s-1. A task taken back from a lost worker goes to the
front of the queue with the input it had.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from edgetwin.emu.crowdio.records import Mode, Payload, TaskReport

TaskKey = tuple[int, int]  # (input index, stage index)


class TaskState(Enum):
    WAITING = "waiting"  # dependencies not met
    READY = "ready"  # in the ready queue
    RUNNING = "running"  # assigned to a worker
    DONE = "done"


@dataclass
class TaskRecord:
    """One task's state and history."""

    input_index: int
    stage_index: int
    state: TaskState = TaskState.WAITING
    payload: Payload | None = None  # its input, once injected
    output: Payload | None = None
    worker_id: str | None = None
    attempts: int = 0  # dispatches so far
    failures: int = 0  # attempts its worker reported as failed
    ready_ms: float = 0.0
    dispatch_ms: float = 0.0
    done_ms: float = 0.0
    report: TaskReport | None = None


class TaskTable:
    """The N x S task records of one job and the queue of ready tasks."""

    def __init__(self, inputs: Sequence[Payload], stages: int, mode: Mode) -> None:
        self.stages = stages
        self.mode = mode
        self.records = {(i, s): TaskRecord(i, s) for i in range(len(inputs)) for s in range(stages)}
        self.queue: list[TaskKey] = []
        for i, payload in enumerate(inputs):
            self.records[(i, 0)].payload = payload
            self._make_ready((i, 0), 0.0)

    def ready(self) -> list[TaskKey]:
        """Ready tasks, oldest first."""
        return list(self.queue)

    def assign(self, key: TaskKey, worker_id: str, now_ms: float) -> TaskRecord:
        """Take a ready task out of the queue for ``worker_id``."""
        record = self.records[key]
        self.queue.remove(key)
        record.state, record.worker_id = TaskState.RUNNING, worker_id
        record.attempts += 1
        record.dispatch_ms = now_ms
        return record

    def complete(
        self, key: TaskKey, output: Payload, report: TaskReport, now_ms: float
    ) -> list[TaskKey]:
        """Record a result, inject it downstream; the tasks that became ready."""
        record = self.records[key]
        record.state, record.output, record.report = TaskState.DONE, output, report
        record.done_ms = now_ms
        input_index, stage = key
        if stage + 1 == self.stages:
            return []
        self.records[(input_index, stage + 1)].payload = output
        if self.mode == "streaming":
            downstream = [(input_index, stage + 1)]
        elif self.stage_done(stage):
            downstream = [(i, s) for (i, s) in self.records if s == stage + 1]
        else:
            downstream = []
        for task in downstream:
            self._make_ready(task, now_ms)
        return downstream

    def take_back(self, key: TaskKey, *, failed: bool) -> None:
        """Put a running task back at the front of the queue (its worker failed or left)."""
        record = self.records[key]
        record.state, record.worker_id = TaskState.READY, None
        record.failures += int(failed)
        self.queue.insert(0, key)

    def running_on(self, worker_id: str) -> list[TaskKey]:
        """Tasks assigned to ``worker_id`` and not done."""
        return [
            key
            for key, record in self.records.items()
            if record.state is TaskState.RUNNING and record.worker_id == worker_id
        ]

    def unassigned(self, stage: int) -> int:
        """Tasks of ``stage`` not yet given to a worker (waiting or ready)."""
        return sum(
            1
            for (_, s), record in self.records.items()
            if s == stage and record.state in (TaskState.WAITING, TaskState.READY)
        )

    def stage_done(self, stage: int) -> bool:
        """Whether every task of ``stage`` is done."""
        return all(r.state is TaskState.DONE for (_, s), r in self.records.items() if s == stage)

    @property
    def finished(self) -> bool:
        """Whether every task is done."""
        return all(record.state is TaskState.DONE for record in self.records.values())

    def _make_ready(self, key: TaskKey, now_ms: float) -> None:
        record = self.records[key]
        record.state, record.ready_ms = TaskState.READY, now_ms
        self.queue.append(key)
