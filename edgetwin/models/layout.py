"""Which token rows each rank holds and sends per block: the one partition layout.

Partitions are contiguous and the terminal (rank 0) takes the remainder and
the CLS token (``partition_sizes``). Prism splits each partition into
min(L, rows) contiguous segments the same way and sends their means. An
all-gather needs equal shapes: every contribution crosses the wire padded to
``padded_rows`` and is cut back to its true rows on arrival. The twin's cost
plan, the real exchange and the machine calibration all read this layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from edgetwin.number_text import counted


def partition_sizes(tokens: int, devices: int) -> tuple[int, ...]:
    """Contiguous partitions; the first ones (the terminal first) take the remainder."""
    base, extra = divmod(tokens, devices)
    return tuple(base + (1 if p < extra else 0) for p in range(devices))


def segments_for_cr(tokens: int, devices: int, cr: float) -> int:
    """Segments per partition L for a compression ratio CR = N / (L P)."""
    return max(1, round(tokens / (cr * devices)))


def resolved_segments(tokens: int, devices: int, segments: int | None, cr: float | None) -> int:
    """Segments L a split of ``tokens`` over ``devices`` runs with: the requested L, or the
    nearest whole L to a requested CR, at most the largest partition's rows (more segments
    than rows send every row, as ``segment_means`` does)."""
    if segments is None:
        assert cr is not None, "a split by segments needs L or CR"
        segments = segments_for_cr(tokens, devices, cr)
    return min(segments, max(partition_sizes(tokens, devices)))


@dataclass(frozen=True)
class Layout:
    """Rows per rank; for segment means also each rank's segment sizes (``None``: full rows)."""

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
        """True rows ``rank`` contributes to each block's all-gather (padding excluded)."""
        if self.segment_rows is None:
            return self.partition_rows[rank]
        return len(self.segment_rows[rank])

    @property
    def sent_rows_per_rank(self) -> tuple[int, ...]:
        return tuple(self.sent_rows(rank) for rank in range(self.world))

    @property
    def padded_rows(self) -> int:
        """Rows every contribution crosses the wire as (all-gather needs equal shapes)."""
        return max(self.sent_rows_per_rank)

    def context_rows(self, rank: int) -> int:
        """Rows ``rank``'s keys/values are computed over (own rows plus what it receives)."""
        return self.partition_rows[rank] + sum(self.sent_rows_per_rank) - self.sent_rows(rank)

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


def full_rows(tokens: int, world: int) -> Layout:
    """Every rank sends its whole partition (full exchange; one rank: nothing is sent)."""
    if world > tokens:
        raise ValueError(f"{counted(tokens, 'token')} cannot be split over {world} ranks")
    return Layout(partition_sizes(tokens, world))


def segment_means(tokens: int, world: int, segments: int) -> Layout:
    """Every rank sends the means of min(L, rows) contiguous segments of its partition."""
    if segments < 1:
        raise ValueError(f"segments must be >= 1 (got {segments})")
    rows = full_rows(tokens, world).partition_rows
    return Layout(rows, tuple(partition_sizes(own, min(segments, own)) for own in rows))
