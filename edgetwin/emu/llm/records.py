"""What one rank measured, written as JSON by the worker and read by the launcher.

Times are this rank's view; rank 0 (the terminal, which holds every token) is the one a
results row reports. The rank that computes the logits last (the last rank) compares them
with a single-device run of the same weights and prompt.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from edgetwin.atomic import write_text_atomic


@dataclass(frozen=True)
class GenerationTiming:
    """One generation: when each output token was held (ms from the start), the whole
    generation's wall time, and ms per part (prefill, decode) and phase."""

    token_ms: tuple[float, ...]
    total_ms: float
    parts_ms: dict[str, dict[str, float]]

    @property
    def ttft_ms(self) -> float:
        """Prefill plus the first token."""
        return self.token_ms[0]

    @property
    def decode_ms(self) -> tuple[float, ...]:
        """Each decode step: from one token held to the next."""
        return tuple(b - a for a, b in zip(self.token_ms, self.token_ms[1:], strict=False))

    @property
    def tpot_ms(self) -> float | None:
        """Mean time per output token after the first (``None`` for one output token)."""
        steps = self.decode_ms
        return statistics.fmean(steps) if steps else None

    def phase_ms(self, phase: str) -> float:
        """ms of ``phase`` over both parts."""
        return sum(phases.get(phase, 0.0) for phases in self.parts_ms.values())


@dataclass(frozen=True)
class RankRecord:
    """Everything one rank did in one launch: the timed generations (and the wall time of
    each untimed warm-up generation before them), the bytes it put
    into sends and collectives per part of one generation, the tokens it holds [B][O],
    the bytes of the KV cache its strategy made it keep, and (last rank of a distributed
    run) how its logits and tokens compare with one device's."""

    rank: int
    world: int
    strategy: str
    device: str
    threads: int
    reps: tuple[GenerationTiming, ...]
    bytes_sent: dict[str, int]
    tokens: tuple[tuple[int, ...], ...] | None = None
    kv_cache_bytes: int = 0
    warmup_ms: tuple[float, ...] = ()
    max_abs_diff_vs_single: float | None = None
    prefix_agreement_vs_single: float | None = None


@dataclass(frozen=True)
class Measured:
    """One timed generation as a results row reports it: rank 0's times (the terminal
    holds every token; waiting for peers counts as comm), every rank's bytes, and the
    last rank's comparison with one device."""

    ttft_ms: float
    tpot_ms: float | None
    total_ms: float  # ttft_ms + (output_tokens - 1) tpot_ms: the last token held
    compute_ms: float
    staging_ms: float
    comm_ms: float
    bytes_sent: int
    max_abs_diff_vs_single: float | None
    prefix_agreement_vs_single: float | None


def measured(records: Sequence[RankRecord]) -> list[Measured]:
    """One ``Measured`` per timed generation of a launch (records in rank order)."""
    last = records[-1]
    sent = sum(sum(record.bytes_sent.values()) for record in records)
    return [
        Measured(
            rep.ttft_ms,
            rep.tpot_ms,
            rep.token_ms[-1],
            rep.phase_ms("compute"),
            rep.phase_ms("stage_out") + rep.phase_ms("stage_in"),
            rep.phase_ms("comm"),
            sent,
            last.max_abs_diff_vs_single,
            last.prefix_agreement_vs_single,
        )
        for rep in records[0].reps
    ]


def write_record(path: Path, record: RankRecord) -> None:
    write_text_atomic(path, json.dumps(asdict(record)))


def read_record(path: Path) -> RankRecord:
    raw: dict[str, Any] = json.loads(path.read_text())
    reps = tuple(
        GenerationTiming(tuple(rep["token_ms"]), rep["total_ms"], rep["parts_ms"])
        for rep in raw.pop("reps")
    )
    tokens = raw.pop("tokens")
    held = None if tokens is None else tuple(tuple(row) for row in tokens)
    return RankRecord(reps=reps, tokens=held, warmup_ms=tuple(raw.pop("warmup_ms")), **raw)
