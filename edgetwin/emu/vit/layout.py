"""Which token rows each rank holds and what it sends per block (pure; no torch).

Partitions are contiguous and the terminal (rank 0) takes the remainder and
the CLS token (``partition_sizes``). Prism splits each partition into
min(L, rows) contiguous segments the same way and sends their means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from edgetwin.sim.costs import partition_sizes

STRATEGIES = ("single", "voltage", "prism")


@dataclass(frozen=True)
class Layout:
    """Rows per rank; for prism also each rank's segment sizes (``None``: full rows are sent)."""

    strategy: str
    partition_rows: tuple[int, ...]
    segment_rows: tuple[tuple[int, ...], ...] | None = None

    @property
    def world(self) -> int:
        return len(self.partition_rows)

    @property
    def tokens(self) -> int:
        return sum(self.partition_rows)

    def bounds(self, rank: int) -> tuple[int, int]:
        """First and one-past-last token of ``rank``'s partition."""
        start = sum(self.partition_rows[:rank])
        return start, start + self.partition_rows[rank]

    def sent_rows(self, rank: int) -> int:
        """Rows ``rank`` contributes to each block's all_gather."""
        if self.segment_rows is None:
            return self.partition_rows[rank]
        return len(self.segment_rows[rank])

    @property
    def padded_rows(self) -> int:
        """all_gather needs equal shapes: every contribution is padded to this many rows."""
        return max(self.sent_rows(rank) for rank in range(self.world))

    def context_rows(self, rank: int) -> int:
        """Rows ``rank``'s keys/values are computed over (own rows plus what it receives)."""
        received = sum(self.sent_rows(q) for q in range(self.world) if q != rank)
        return self.partition_rows[rank] + received

    def context_log_counts(self, rank: int) -> tuple[float, ...] | None:
        """log(tokens a context row stands for), in rank order; ``None`` when every row is one."""
        if self.segment_rows is None or all(
            size == 1 for q, sizes in enumerate(self.segment_rows) if q != rank for size in sizes
        ):
            return None
        counts: list[float] = []
        for q, sizes in enumerate(self.segment_rows):
            if q == rank:
                counts += [0.0] * self.partition_rows[q]
            else:
                counts += [math.log(size) for size in sizes]
        return tuple(counts)


def make_layout(strategy: str, tokens: int, world: int, segments: int | None = None) -> Layout:
    """The layout of ``strategy`` on ``world`` ranks (prism needs ``segments`` L >= 1)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; the real code paths: {STRATEGIES}")
    if (strategy == "single") != (world == 1):
        raise ValueError(f"{strategy} cannot run on {world} rank(s)")
    if world > tokens:
        raise ValueError(f"{tokens} tokens cannot be split over {world} ranks")
    if (strategy == "prism") != (segments is not None):
        raise ValueError("prism needs segments; the other strategies take none")
    rows = partition_sizes(tokens, world)
    if segments is None:
        return Layout(strategy, rows)
    if segments < 1:
        raise ValueError(f"segments must be >= 1 (got {segments})")
    sizes = tuple(partition_sizes(own, min(segments, own)) for own in rows)
    return Layout(strategy, rows, sizes)
