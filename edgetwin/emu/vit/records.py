"""What one rank measured, written as JSON by the worker and read by the launcher."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from edgetwin.atomic import write_text_atomic
from edgetwin.emu.vit.phases import ForwardTiming


@dataclass(frozen=True)
class RunRecord:
    """One (batch, segments) run: its timed forwards, the wall time of each untimed
    warm-up forward before them and, at rank 0, how it compares with the single-device
    output on the same input and weights."""

    batch: int
    segments: int | None
    reps: tuple[ForwardTiming, ...]
    bytes_sent_per_forward: int
    warmup_ms: tuple[float, ...] = ()
    logits: tuple[tuple[float, ...], ...] | None = None
    max_abs_diff_vs_single: float | None = None
    top1_agreement_vs_single: float | None = None


@dataclass(frozen=True)
class RankRecord:
    """Everything one rank did in one launch."""

    rank: int
    world: int
    strategy: str
    device: str
    threads: int
    runs: tuple[RunRecord, ...]


def write_record(path: Path, record: RankRecord) -> None:
    write_text_atomic(path, json.dumps(asdict(record)))


def read_record(path: Path) -> RankRecord:
    raw = json.loads(path.read_text())
    runs = tuple(_run(run) for run in raw.pop("runs"))
    return RankRecord(runs=runs, **raw)


def _run(raw: dict[str, Any]) -> RunRecord:
    reps = tuple(ForwardTiming(**rep) for rep in raw.pop("reps"))
    logits = raw.pop("logits")
    rows = None if logits is None else tuple(tuple(row) for row in logits)
    return RunRecord(reps=reps, warmup_ms=tuple(raw.pop("warmup_ms")), logits=rows, **raw)
