"""Warm ONNX session loads measured on this machine, and the load model fitted to them.

A warm load is what the real worker does with a stage on its storage
(``worker._load``): read the cached blob and check its SHA-256
(``ModelCache.get``), then create the ONNX Runtime session (``SessionSlot.load``,
one intra-op thread, as the emulator's workers run). Both touch every byte of
the stage's weights (read, hash, deserialise, copy into tensors); session
creation also initialises each graph node. The model fitted by least squares is

    load_ms = floor_ms + ms_per_mb x size_mb
              + ms_per_mapped_mb x size_mb   (only for a file over MMAP_CEILING_MB)
              [+ ms_per_node x nodes: fitted as a check, the twin's stages have no nodes]

over the measured stages of the full-size DistilBERT (three- and six-stage
cuts of ``emu.crowdio.model``; the embeddings make bytes and nodes separable:
cell_a and cell_b have about the same nodes, not the same bytes). The mapped
term: glibc serves a buffer above its largest dynamic mmap threshold (32 MiB
on 64-bit) with a fresh mapping every time, so the blob of a large stage is
page-faulted in on every load; smaller buffers come back from the heap. With
``MALLOC_MMAP_THRESHOLD_`` raised to 1 GB the term fits to 0 (docs/crowd.md).

The measurements: ``session_load_measure`` (its command regenerates the shipped ones).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean, pstdev

import numpy as np

from edgetwin.comparison import relative_pct
from edgetwin.csv_rows import Row, check_once, read_rows
from edgetwin.errors import InputError
from edgetwin.phone_profile import MMAP_CEILING_MB

COLUMNS = ("cut", "stage", "size_mb", "nodes", "rep", "read_ms", "session_ms", "load_ms")


@dataclass(frozen=True)
class LoadSample:
    """One warm load of one stage: its size, graph nodes and what it took."""

    cut: int  # how many stages the model was cut into
    stage: str
    size_mb: float  # the ONNX file (weights and graph), 1e6 bytes
    nodes: int  # graph nodes to initialise
    rep: int
    read_ms: float  # cached blob read and SHA-256 checked
    session_ms: float  # InferenceSession created
    load_ms: float  # the two: the worker's warm load


@dataclass(frozen=True)
class SessionLoadFit:
    """The load model (module docstring) and its relative residuals over the stages."""

    floor_ms: float
    ms_per_mb: float
    ms_per_mapped_mb: float
    ms_per_node: float
    median_abs_error_pct: float
    max_abs_error_pct: float

    def predict_ms(self, size_mb: float, nodes: int = 0) -> float:
        return float(np.array(_regressors(size_mb, nodes)) @ self._coefficients())

    def _coefficients(self) -> np.ndarray:
        return np.array([self.floor_ms, self.ms_per_mb, self.ms_per_mapped_mb, self.ms_per_node])


def _regressors(size_mb: float, nodes: float) -> list[float]:
    return [1.0, size_mb, size_mb if size_mb > MMAP_CEILING_MB else 0.0, float(nodes)]


@dataclass(frozen=True)
class StageLoad:
    """Mean and spread of one stage's loads over the repetitions."""

    cut: int
    stage: str
    size_mb: float
    nodes: int
    runs: int
    mean_ms: float
    std_ms: float
    median_ms: float
    min_ms: float
    max_ms: float


def stage_loads(samples: Sequence[LoadSample]) -> list[StageLoad]:
    """Per (cut, stage), in file order: mean, std, median, min and max of the load."""
    groups: dict[tuple[int, str], list[LoadSample]] = {}
    for s in samples:
        groups.setdefault((s.cut, s.stage), []).append(s)
    out = []
    for (cut, stage), group in groups.items():
        loads = [s.load_ms for s in group]
        first = group[0]
        out.append(
            StageLoad(
                cut,
                stage,
                first.size_mb,
                first.nodes,
                len(loads),
                fmean(loads),
                pstdev(loads),
                float(np.median(loads)),
                min(loads),
                max(loads),
            )
        )
    return out


def fit_session_load(samples: Sequence[LoadSample], per_node: bool = False) -> SessionLoadFit:
    """Non-negative least squares of the load model on every stage's median load.

    ``per_node`` False fits bytes only (what the twin's stages know); True adds
    the graph nodes, to see whether they explain more. The
    median per stage keeps a repetition slowed by other work on the machine from
    pulling the fit; each stage counts once, by relative error (rows divided by
    the measured time), so the 2 MB head weighs as much as the 180 MB cell_a.
    """
    from scipy.optimize import nnls

    groups: dict[tuple[int, str], list[LoadSample]] = {}
    for s in samples:
        groups.setdefault((s.cut, s.stage), []).append(s)
    if len(groups) < 3:  # read_session_loads says so of a file
        raise ValueError(f"the load model needs three stages or more, not {len(groups)}")
    rows, measured = [], []
    for group in groups.values():
        measured.append(float(np.median([s.load_ms for s in group])))
        rows.append(_regressors(group[0].size_mb, group[0].nodes if per_node else 0))
    a = np.array(rows)
    y = np.array(measured)
    coef, _ = nnls(a / y[:, None], np.ones_like(y))
    errors = np.abs([relative_pct(p, m) for p, m in zip(a @ coef, y, strict=True)])
    return SessionLoadFit(
        floor_ms=float(coef[0]),
        ms_per_mb=float(coef[1]),
        ms_per_mapped_mb=float(coef[2]),
        ms_per_node=float(coef[3]),
        median_abs_error_pct=float(np.median(errors)),
        max_abs_error_pct=float(errors.max()),
    )


def read_session_loads(path: Path) -> list[LoadSample]:
    """The measurements file, each (cut, stage, rep) once; a bad cell names the file, its
    column and the line."""
    if not path.is_file():
        raise InputError(path, None, "file not found")
    rows = read_rows(path, COLUMNS)
    samples = [_load_sample(row) for row in rows]
    check_once(rows, ("cut", "stage", "rep"), [(s.cut, s.stage, s.rep) for s in samples])
    stages = len({(s.cut, s.stage) for s in samples})
    if stages < 3:
        raise InputError(path, None, f"{stages} stage(s): the load model needs three or more")
    return samples


def _load_sample(row: Row) -> LoadSample:
    """One row: whole counts, finite sizes and times >= 0, a load above 0 (the fit divides
    by it)."""
    return LoadSample(
        cut=row.integer("cut", minimum=1),
        stage=row.text("stage"),
        size_mb=row.number("size_mb", minimum=0.0),
        nodes=row.integer("nodes", minimum=0),
        rep=row.integer("rep", minimum=0),
        read_ms=row.number("read_ms", minimum=0.0),
        session_ms=row.number("session_ms", minimum=0.0),
        load_ms=row.positive("load_ms"),
    )
