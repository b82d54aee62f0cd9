"""GLOO-staged AllGather timings: ``gloo_staged_allgather.csv`` and ``..._bw.csv``.

Each row is one forward's 12 (``blocks``) exchanges of a [batch, rows, 768] fp32
tensor per rank: GPU->host (``d2h_ms``), GLOO all_gather (``comm_ms``), concatenate
and copy back (``h2d_ms``), summed over the blocks; ``total_ms`` is their wall time.

- loopback (``gloo_staged_allgather.csv``): rank, batch, rows, bytes_per_rank, blocks,
  rep, d2h_ms, comm_ms, h2d_ms, total_ms.
- shaped link (``gloo_staged_allgather_bw.csv``): bandwidth_mbps instead of rank
  (rank 0's timings).

Each forward (rank or link, batch, rows, bytes_per_rank, blocks, rep) is one row, and each
time is above 0 ms.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edgetwin.csv_rows import Row, check_once, read_rows
from edgetwin.decoder_spec import MAX_LAYERS
from edgetwin.schema import MAX_BATCH, MAX_TENSOR_BYTES

LOOPBACK_FILE = "gloo_staged_allgather.csv"
BANDWIDTH_FILE = "gloo_staged_allgather_bw.csv"
TIMING_COLUMNS = ("batch", "rows", "bytes_per_rank", "blocks", "rep")
PHASE_COLUMNS = ("d2h_ms", "comm_ms", "h2d_ms", "total_ms")
LOOPBACK_COLUMNS = ("rank", *TIMING_COLUMNS, *PHASE_COLUMNS)
BANDWIDTH_COLUMNS = ("bandwidth_mbps", *TIMING_COLUMNS, *PHASE_COLUMNS)


@dataclass(frozen=True)
class StagedExchange:
    """One forward's staged exchanges; ``bandwidth_mbps`` is None on loopback (unshaped)."""

    rank: int
    bandwidth_mbps: float | None
    batch: int
    rows: int
    bytes_per_rank: int
    blocks: int
    rep: int
    d2h_ms: float
    comm_ms: float
    h2d_ms: float
    total_ms: float


def read_staged_allgather(path: str | Path) -> list[StagedExchange]:
    """Rows of a loopback ``gloo_staged_allgather.csv``."""
    path = Path(path)
    rows = read_rows(path, LOOPBACK_COLUMNS)
    exchanges = [_exchange(row, row.integer("rank", minimum=0), None) for row in rows]
    check_once(rows, ("rank", *TIMING_COLUMNS), [(e.rank, *_timing_key(e)) for e in exchanges])
    return _one_loop(rows, exchanges)


def read_staged_allgather_bw(path: str | Path) -> list[StagedExchange]:
    """Rows of a shaped-link ``gloo_staged_allgather_bw.csv`` (rank 0)."""
    path = Path(path)
    rows = read_rows(path, BANDWIDTH_COLUMNS)
    exchanges = [_exchange(row, 0, row.positive("bandwidth_mbps")) for row in rows]
    keys = [(e.bandwidth_mbps, *_timing_key(e)) for e in exchanges]
    check_once(rows, ("bandwidth_mbps", *TIMING_COLUMNS), keys)
    return _one_loop(rows, exchanges)


def _timing_key(exchange: StagedExchange) -> tuple[int, ...]:
    """An exchange's ``TIMING_COLUMNS``: with its rank or link, the forward a row times."""
    return (
        exchange.batch,
        exchange.rows,
        exchange.bytes_per_rank,
        exchange.blocks,
        exchange.rep,
    )


def _one_loop(rows: list[Row], exchanges: list[StagedExchange]) -> list[StagedExchange]:
    """The exchanges of a file that times one loop: a row of other ``blocks`` than the first
    is an InputError (its group's residuals and validation points, which do not name the
    blocks, would read as the first loop's). Two files may time two loops."""
    for row, exchange in zip(rows, exchanges, strict=True):
        if exchange.blocks != exchanges[0].blocks:
            first = f"line {rows[0].line} has {exchanges[0].blocks}"
            problem = f"{exchange.blocks} blocks where {first}: a file times one loop"
            raise row.error("blocks", problem)
    return exchanges


def _exchange(row: Row, rank: int, bandwidth_mbps: float | None) -> StagedExchange:
    return StagedExchange(
        rank=rank,
        bandwidth_mbps=bandwidth_mbps,
        batch=row.integer("batch", minimum=1, maximum=MAX_BATCH),
        rows=row.integer("rows", minimum=1),
        bytes_per_rank=row.integer("bytes_per_rank", minimum=0, maximum=MAX_TENSOR_BYTES),
        # the network fit replays each exchange: 10^300 blocks ran until killed
        blocks=row.integer("blocks", minimum=1, maximum=MAX_LAYERS),
        rep=row.integer("rep", minimum=0),
        d2h_ms=row.positive("d2h_ms"),
        comm_ms=row.positive("comm_ms"),
        h2d_ms=row.positive("h2d_ms"),
        total_ms=row.positive("total_ms"),
    )
