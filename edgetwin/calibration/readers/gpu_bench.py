"""The single-GPU benchmark CSVs of ``collect.py`` (H200 loopback traces).

- ``vit_latency.csv``: kernel (``vit_full`` or ``encoder_tokens``), batch, tokens, rep,
  latency_ms (CUDA events).
- ``staging_copy.csv``: direction (d2h|h2d), pinned (0|1), batch, rows, bytes, rep,
  latency_ms (one [batch, rows, 768] fp32 copy, wall clock with synchronize).
- ``vit_energy.csv``: kernel, batch, reps, wall_s, energy_mj (NVML energy counter
  over ``reps`` forwards; coarse, prefer integrating power samples); one row a kernel
  and batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from edgetwin.csv_rows import check_once, read_rows
from edgetwin.schema import MAX_BATCH, MAX_TENSOR_BYTES, MAX_TOKENS

VIT_LATENCY_FILE = "vit_latency.csv"
STAGING_COPY_FILE = "staging_copy.csv"
VIT_ENERGY_FILE = "vit_energy.csv"
VIT_LATENCY_COLUMNS = ("kernel", "batch", "tokens", "rep", "latency_ms")
VIT_LATENCY_KEY = VIT_LATENCY_COLUMNS[:-1]  # one timed forward: a row of each
# what a timed forward ran: the whole model, or the encoder blocks over ``tokens`` rows
VIT_FULL, ENCODER_TOKENS = "vit_full", "encoder_tokens"
VIT_LATENCY_KERNELS = (VIT_FULL, ENCODER_TOKENS)
STAGING_COPY_COLUMNS = ("direction", "pinned", "batch", "rows", "bytes", "rep", "latency_ms")
STAGING_COPY_KEY = STAGING_COPY_COLUMNS[:-1]
VIT_ENERGY_COLUMNS = ("kernel", "batch", "reps", "wall_s", "energy_mj")
# one counter reading, its reps summed in it: a row of each (a second was a copy, or a
# reading of the same forwards that no reader can tell from it)
VIT_ENERGY_KEY = VIT_ENERGY_COLUMNS[:2]


@dataclass(frozen=True)
class VitLatency:
    """One timed forward: ``vit_full`` (whole model) or ``encoder_tokens`` (12 blocks)."""

    kernel: str
    batch: int
    tokens: int
    rep: int
    latency_ms: float


@dataclass(frozen=True)
class StagingCopy:
    """One GPU<->host copy of ``size_bytes``; ``pinned`` host memory or pageable."""

    direction: Literal["d2h", "h2d"]
    pinned: bool
    batch: int
    rows: int
    size_bytes: int
    rep: int
    latency_ms: float


@dataclass(frozen=True)
class CounterEnergy:
    """Energy-counter difference over ``reps`` timed forwards lasting ``wall_s``."""

    kernel: str
    batch: int
    reps: int
    wall_s: float
    energy_mj: float


def read_vit_latency(path: str | Path) -> list[VitLatency]:
    """Rows of a ``vit_latency.csv``: each forward (kernel, batch, tokens, rep) once, timed
    above 0 ms."""
    path = Path(path)
    rows = read_rows(path, VIT_LATENCY_COLUMNS)
    records = [
        VitLatency(
            kernel=row.choice("kernel", VIT_LATENCY_KERNELS),
            batch=row.integer("batch", minimum=1, maximum=MAX_BATCH),
            tokens=row.integer("tokens", minimum=1, maximum=MAX_TOKENS),
            rep=row.integer("rep", minimum=0),
            latency_ms=row.positive("latency_ms"),
        )
        for row in rows
    ]
    check_once(rows, VIT_LATENCY_KEY, [(r.kernel, r.batch, r.tokens, r.rep) for r in records])
    return records


def read_staging_copy(path: str | Path) -> list[StagingCopy]:
    """Rows of a ``staging_copy.csv``: each copy (direction, pinned, batch, rows, bytes,
    rep) once, timed above 0 ms."""
    path = Path(path)
    rows = read_rows(path, STAGING_COPY_COLUMNS)
    records = [
        StagingCopy(
            direction=cast(Literal["d2h", "h2d"], row.choice("direction", ("d2h", "h2d"))),
            pinned=row.choice("pinned", ("0", "1")) == "1",
            batch=row.integer("batch", minimum=1, maximum=MAX_BATCH),
            rows=row.integer("rows", minimum=1),
            size_bytes=row.integer("bytes", minimum=0, maximum=MAX_TENSOR_BYTES),
            rep=row.integer("rep", minimum=0),
            latency_ms=row.positive("latency_ms"),
        )
        for row in rows
    ]
    keys = [(r.direction, r.pinned, r.batch, r.rows, r.size_bytes, r.rep) for r in records]
    check_once(rows, STAGING_COPY_KEY, keys)
    return records


def read_vit_energy(path: str | Path) -> list[CounterEnergy]:
    """Rows of a ``vit_energy.csv``: each counter reading (kernel, batch) once."""
    path = Path(path)
    rows = read_rows(path, VIT_ENERGY_COLUMNS)
    records = [
        CounterEnergy(
            kernel=row.text("kernel"),
            batch=row.integer("batch", minimum=1, maximum=MAX_BATCH),
            reps=row.integer("reps", minimum=1),
            wall_s=row.number("wall_s", minimum=0.0),
            energy_mj=row.number("energy_mj", minimum=0.0),
        )
        for row in rows
    ]
    check_once(rows, VIT_ENERGY_KEY, [(r.kernel, r.batch) for r in records])
    return records
