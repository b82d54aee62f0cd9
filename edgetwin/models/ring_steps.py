"""How many steps a collective takes among P ranks, as GLOO's ring and the twin's
(``sim.collectives``) move it: every rank waits for each step's message before the next,
so a link's latency is paid once a step."""

from __future__ import annotations


def ring_steps(kind: str, ranks: int) -> int:
    """Steps of collective ``kind`` over ``ranks``: an all-gather P-1, an all-reduce
    2 (P-1) (a reduce-scatter, then an all-gather), a scatter, a broadcast or a send one;
    none with a single rank."""
    if ranks < 2:
        return 0
    if kind == "allgather":
        return ranks - 1
    if kind == "allreduce":
        return 2 * (ranks - 1)
    if kind in ("scatter", "broadcast", "send"):
        return 1
    raise ValueError(f"unknown collective {kind!r}")
