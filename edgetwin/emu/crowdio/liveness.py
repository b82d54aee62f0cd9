"""Worker liveness on the foreman: a worker heard from within the silence timeout is alive;
with a per-task deadline, one that has not answered a task that long after its dispatch
is lost too (the decision core's rule, ``CrowdCore.expire``: a worker that beats but
hangs in its inference).

A worker sends a HEARTBEAT every ``heartbeat_s`` (the foreman tells it how often in its
WELCOME); any frame from it counts as heard. One silent for longer than
``silence_timeout_s`` is declared lost, and the foreman treats it as disconnected. The
foreman's own pauses (its event loop blocked, e.g. encoding a large blob) are not held
against the workers: the time a check comes late is added to every worker's last heard.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from edgetwin.emulator_spec import MIN_HEARTBEATS_PER_TIMEOUT
from edgetwin.number_text import exact_text


@dataclass(frozen=True)
class LivenessRule:
    """How often workers beat, how long a silence makes a worker lost, and how long an
    unanswered task does (``task_deadline_s``; None: no deadline)."""

    heartbeat_s: float = 1.0
    silence_timeout_s: float = 15.0
    task_deadline_s: float | None = None

    def __post_init__(self) -> None:
        if self.task_deadline_s is not None and not self.task_deadline_s > 0:
            raise ValueError(
                f"task_deadline_s must be positive, not {exact_text(self.task_deadline_s)}"
            )
        if self.heartbeat_s <= 0:
            raise ValueError(f"heartbeat_s must be positive, not {exact_text(self.heartbeat_s)}")
        if self.silence_timeout_s < MIN_HEARTBEATS_PER_TIMEOUT * self.heartbeat_s:
            raise ValueError(
                f"silence_timeout_s ({exact_text(self.silence_timeout_s)}) must be at least "
                f"{MIN_HEARTBEATS_PER_TIMEOUT} x heartbeat_s ({exact_text(self.heartbeat_s)})"
            )

    @property
    def check_every_s(self) -> float:
        """How often the foreman looks for silent workers and overdue tasks."""
        every_s = min(self.heartbeat_s, self.silence_timeout_s / 4)
        return every_s if self.task_deadline_s is None else min(every_s, self.task_deadline_s / 4)


class SilenceWatch:
    """When each worker was last heard from; ``silent()`` names the lost ones."""

    def __init__(self, rule: LivenessRule, clock: Callable[[], float] = time.monotonic) -> None:
        self.rule = rule
        self._clock = clock
        self._heard_s: dict[str, float] = {}
        self._checked_s = clock()

    def heard(self, worker_id: str) -> None:
        self._heard_s[worker_id] = self._clock()

    def forget(self, worker_id: str) -> None:
        self._heard_s.pop(worker_id, None)

    def silent(self) -> list[tuple[str, float]]:
        """Workers silent for longer than the timeout, with their silence (s), forgotten."""
        now = self._clock()
        late_s = max(now - self._checked_s - self.rule.check_every_s, 0.0)
        self._checked_s = now
        lost = []
        for worker_id in list(self._heard_s):
            self._heard_s[worker_id] += late_s
            silence_s = now - self._heard_s[worker_id]
            if silence_s > self.rule.silence_timeout_s:
                lost.append((worker_id, silence_s))
                del self._heard_s[worker_id]
        return lost
