"""Hardware trace records in the groups a fit runs on, and each group's label in an error
or a residual: compute latencies by (kernel, batch, tokens), the phases of a staged
exchange by exchange, plain copies by (direction, bytes).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from edgetwin.calibration.group_fit import GroupKey
from edgetwin.calibration.readers.gpu_bench import StagingCopy, VitLatency
from edgetwin.calibration.readers.staged_exchange import StagedExchange
from edgetwin.number_text import counted, exact_text

LOOPBACK_MBPS = 100_000.0  # nominal rate of an unshaped loopback/veth link: the stack limits
LATENCY_MS = "latency_ms"  # the column a compute or plain copy group times


def compute_groups(latencies: Sequence[VitLatency]) -> dict[GroupKey, list[float]]:
    """Latencies by (kernel, batch, tokens)."""
    groups: dict[GroupKey, list[float]] = defaultdict(list)
    for record in latencies:
        groups[(record.kernel, record.batch, record.tokens)].append(record.latency_ms)
    return dict(groups)


def compute_label(key: GroupKey) -> str:
    """A compute group as its ``vit_latency.csv`` rows say it: ``vit_full, batch 8, 197
    tokens``."""
    kernel, batch, tokens = key
    return f"{kernel}, batch {batch}, {counted(tokens, 'token')}"


def describe_compute(key: GroupKey) -> tuple[str, str]:
    """A compute group's metric and point (``Describe``)."""
    return LATENCY_MS, compute_label(key)


def exchange_key(record: StagedExchange) -> GroupKey:
    """(bandwidth, batch, rows, bytes per rank, blocks) of an exchange; loopback at its
    nominal rate. The blocks are the loop its replay runs (a forward of each)."""
    bandwidth = record.bandwidth_mbps or LOOPBACK_MBPS
    return (bandwidth, record.batch, record.rows, record.bytes_per_rank, record.blocks)


def exchange_label(key: GroupKey) -> str:
    """An exchange group (``exchange_key``) as its trace rows say it: ``batch 8, 98 rows a
    rank (2408448 bytes), 200 Mbit/s``, or ``loopback`` for an unshaped link."""
    bandwidth_mbps, batch, rows, piece_bytes, _blocks = key  # one count a trace file
    link = "loopback" if bandwidth_mbps == LOOPBACK_MBPS else f"{exact_text(bandwidth_mbps)} Mbit/s"
    return f"batch {batch}, {counted(rows, 'row')} a rank ({piece_bytes} bytes), {link}"


def exchange_groups(exchanges: Sequence[StagedExchange], phase: str) -> dict[GroupKey, list[float]]:
    """Per-block ``phase`` time (d2h_ms, h2d_ms, comm_ms) by exchange key."""
    groups: dict[GroupKey, list[float]] = defaultdict(list)
    for record in exchanges:
        groups[exchange_key(record)].append(getattr(record, phase) / record.blocks)
    return dict(groups)


COPY_PHASES = ("d2h_ms", "h2d_ms")  # the two copies of a staged exchange


def staging_groups(exchanges: Sequence[StagedExchange]) -> dict[GroupKey, list[float]]:
    """Per-block copy times by (phase, *exchange key): every exchange's two copies."""
    return {
        (phase, *key): times
        for phase in COPY_PHASES
        for key, times in exchange_groups(exchanges, phase).items()
    }


def describe_staging(key: GroupKey) -> tuple[str, str]:
    """A ``staging_groups`` group's metric (its phase) and point (``Describe``)."""
    return key[0], exchange_label(key[1:])


def describe_comm(key: GroupKey) -> tuple[str, str]:
    """An exchange group's communication time and point (``Describe``)."""
    return "comm_ms", exchange_label(key)


def copy_groups(copies: Sequence[StagingCopy]) -> dict[GroupKey, list[float]]:
    """Plain copy latency by (direction, bytes)."""
    groups: dict[GroupKey, list[float]] = defaultdict(list)
    for copy in copies:
        groups[(copy.direction, copy.size_bytes)].append(copy.latency_ms)
    return dict(groups)


def copy_label(key: GroupKey) -> str:
    """A plain copy group as its ``staging_copy.csv`` rows say it: ``h2d, 245760 bytes``."""
    direction, size_bytes = key
    return f"{direction}, {size_bytes} bytes"


def describe_copy(key: GroupKey) -> tuple[str, str]:
    """A plain copy group's metric and point (``Describe``)."""
    return LATENCY_MS, copy_label(key)


def exchange_gaps(exchanges: Sequence[StagedExchange]) -> dict[GroupKey, float]:
    """Mean copy time per block (d2h + h2d) of every exchange group."""
    d2h, h2d = (exchange_groups(exchanges, phase) for phase in COPY_PHASES)
    return {k: float(np.mean(d2h[k]) + np.mean(h2d[k])) for k in d2h}
