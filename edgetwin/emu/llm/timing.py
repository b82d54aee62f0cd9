"""Wall-clock time of one rank's generation: per part (prefill, decode) and phase
(compute, stage_out, comm, stage_in, as ``vit.phases``), and when each token was held."""

from __future__ import annotations

import time
from typing import Literal

import torch

from edgetwin.emu.llm.records import GenerationTiming
from edgetwin.emu.vit.phases import PhaseClock

Part = Literal["prefill", "decode"]
PREFILL: Part = "prefill"
DECODE: Part = "decode"


class GenerationClock(PhaseClock):
    """A ``PhaseClock`` whose steps are the parts, plus the moment each token is held."""

    def __init__(self, device: torch.device) -> None:
        super().__init__(device)
        self._token_ms: list[float] = []

    def start(self) -> None:
        super().start()
        self._token_ms = []

    def token_held(self) -> None:
        """This rank now holds the next output token of every sequence."""
        self._sync()
        self._token_ms.append((time.perf_counter() - self._start_s) * 1e3)

    def stop_generation(self) -> GenerationTiming:
        timing = self.stop()
        return GenerationTiming(tuple(self._token_ms), timing.total_ms, timing.steps_ms)
