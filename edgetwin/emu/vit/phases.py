"""Wall-clock time of each phase of each step of one rank's forward.

Steps are ``embed``, ``block0`` ... ``block{n-1}``, ``head``. Phases:
``compute`` (model arithmetic), ``stage_out`` (device -> host, packing the
send buffer), ``comm`` (GLOO, waiting for peers included), ``stage_in``
(unpacking, host -> device, assembling the context). On a GPU the device is
synchronised at every phase boundary, so each phase owns its kernels.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import torch

Phase = Literal["compute", "stage_out", "comm", "stage_in"]
PHASES: tuple[Phase, ...] = ("compute", "stage_out", "comm", "stage_in")


@dataclass(frozen=True)
class ForwardTiming:
    """One forward at one rank: wall time and milliseconds per step and phase."""

    total_ms: float
    steps_ms: dict[str, dict[str, float]]

    def phase_ms(self, phase: Phase) -> float:
        return sum(step.get(phase, 0.0) for step in self.steps_ms.values())

    @property
    def staging_ms(self) -> float:
        return self.phase_ms("stage_out") + self.phase_ms("stage_in")


class PhaseClock:
    """Accumulates phase times of one forward; labels phases for the profiler when asked."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.label_phases = False
        self._steps: dict[str, dict[str, float]] = {}
        self._start_s = time.perf_counter()

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def start(self) -> None:
        self._sync()
        self._steps = {}
        self._start_s = time.perf_counter()

    @contextmanager
    def phase(self, step: str, phase: Phase) -> Iterator[None]:
        """Time the body as ``phase`` of ``step`` (adds up if a step has the phase twice)."""
        self._sync()
        begin = time.perf_counter()
        if self.label_phases:
            with torch.profiler.record_function(f"{step}/{phase}"):
                yield
                self._sync()
        else:
            yield
            self._sync()
        step_ms = self._steps.setdefault(step, {})
        step_ms[phase] = step_ms.get(phase, 0.0) + (time.perf_counter() - begin) * 1e3

    def stop(self) -> ForwardTiming:
        self._sync()
        total_ms = (time.perf_counter() - self._start_s) * 1e3
        return ForwardTiming(total_ms, self._steps)
