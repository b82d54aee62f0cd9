"""Collectives built from point-to-point transfers (ring algorithms, as GLOO's).

- allgather: P-1 steps; in step k rank i forwards piece (i - k) mod P to i+1.
- allreduce: reduce-scatter then allgather, 2(P-1) steps of 1/P of the tensor.
- scatter: the terminal (rank 0) sends every other rank its piece at once.
Within a step all transfers run concurrently and share their channels; a transfer
whose receiver also sends in that step is duplex (``NetworkParams.duplex_efficiency``).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

import simpy

from edgetwin.sim.device import Device
from edgetwin.sim.network import Network


def run_collective(
    env: simpy.Environment,
    network: Network,
    devices: Sequence[Device],
    kind: str,
    piece_bytes: Sequence[float],
) -> Generator[simpy.Event, object, None]:
    """Run one collective to completion over ``devices`` (rank order)."""
    for step in _steps(kind, piece_bytes):
        senders = {src for src, _dst, nbytes in step if nbytes > 0}
        transfers = [
            env.process(
                network.transfer(devices[src].name, devices[dst].name, nbytes, dst in senders)
            )
            for src, dst, nbytes in step
            if nbytes > 0
        ]
        yield env.all_of(transfers)


def _steps(kind: str, piece_bytes: Sequence[float]) -> list[list[tuple[int, int, float]]]:
    """The (src, dst, bytes) transfers of each step."""
    ranks = len(piece_bytes)
    if kind == "scatter":
        return [[(0, dst, piece_bytes[dst]) for dst in range(1, ranks)]]
    if kind == "allgather":
        return [
            [(i, (i + 1) % ranks, piece_bytes[(i - k) % ranks]) for i in range(ranks)]
            for k in range(ranks - 1)
        ]
    if kind == "allreduce":
        chunk = piece_bytes[0] / ranks
        return [[(i, (i + 1) % ranks, chunk) for i in range(ranks)] for _ in range(2 * (ranks - 1))]
    raise ValueError(f"unknown collective {kind!r}")
