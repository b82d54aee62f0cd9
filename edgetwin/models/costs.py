"""Cost plans: what a strategy's forward costs, as pure data (no event loop).

For a model and a strategy on P devices a ``CostPlan`` says, per device and
per block, how many FLOPs the device does (from the tokens it computes
queries for and the tokens it attends over) and which tensors cross the
network. FLOPs count a multiply-add as two. Each strategy builds its plan
(``edgetwin.models.strategies``); the twin runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from edgetwin.model_spec import ModelSpec
from edgetwin.models.encoder_memory import RankRows, peak_floats
from edgetwin.models.layout import Layout
from edgetwin.models.ring_steps import ring_steps

Collective = Literal["allgather", "allreduce", "scatter"]
InputSource = Literal["terminal", "replicated"]


@dataclass(frozen=True)
class Exchange:
    """One collective; ``rows_per_rank`` is each rank's true contribution (per sample).

    ``padded_rows``: an all-gather needs equal shapes, so every contribution crosses the
    wire as this many rows (``None``: as its true rows).
    """

    collective: Collective
    rows_per_rank: tuple[int, ...]
    padded_rows: int | None = None

    def wire_rows(self, rank: int) -> int:
        """Rows of ``rank``'s contribution on the wire (per sample)."""
        return self.rows_per_rank[rank] if self.padded_rows is None else self.padded_rows

    def contributed_rows(self) -> int:
        """Rows (per sample) the ranks put into this collective, summed over ranks: each
        rank's piece as it crosses the wire, once, however the collective forwards it (a
        scatter: every rank's rows but the terminal's, which it keeps)."""
        ranks = range(1 if self.collective == "scatter" else 0, len(self.rows_per_rank))
        return sum(self.wire_rows(rank) for rank in ranks)


@dataclass(frozen=True)
class BlockStep:
    """A piece of a block on one device: FLOPs per sample, then an optional exchange."""

    flops_per_sample: float
    exchange_after: Exchange | None = None


@dataclass(frozen=True)
class CostPlan:
    """Work of a whole forward: per-device block steps plus embedding and head on rank 0."""

    strategy: str
    partition_tokens: tuple[int, ...]
    kv_tokens: tuple[int, ...]
    segments: int | None
    block_steps: tuple[tuple[BlockStep, ...], ...]  # [device][step]
    embed_flops_per_sample: tuple[float, ...]  # per device
    embed_rows: tuple[int, ...]  # rows per sample each device's embedding runs over
    head_flops_per_sample: float
    exchange_before_block: Exchange | None
    weight_bytes_per_device: float
    scatter_rows: tuple[int, ...] | None  # rows the terminal sends each device, if it does
    # per device: elements one sample makes it hold at its peak (models/encoder_memory.py)
    peak_floats_per_sample: tuple[float, ...]

    @property
    def devices(self) -> int:
        return len(self.partition_tokens)

    @property
    def scatter(self) -> Exchange | None:
        """The terminal's scatter of the input rows, if it sends them."""
        return None if self.scatter_rows is None else Exchange("scatter", self.scatter_rows)

    def contributed_bytes(self, batch: int, blocks: int, row_bytes: int) -> int:
        """docs/llm.md's ``bytes_sent`` of one forward of ``batch`` samples: what every rank
        puts into the scatter and each block's collectives, summed over ranks, not what a
        ring forwards on the wire (the real code counts the same figure)."""
        per_block = [self.exchange_before_block] + [s.exchange_after for s in self.block_steps[0]]
        rows = blocks * sum(e.contributed_rows() for e in per_block if e is not None)
        if self.scatter is not None:
            rows += self.scatter.contributed_rows()
        return rows * batch * row_bytes

    def messages(self, blocks: int) -> int:
        """Messages of one forward the ranks wait for in turn: the scatter's and each
        block's collectives' ring steps (``ring_steps``), whatever the batch."""
        per_block = [self.exchange_before_block] + [s.exchange_after for s in self.block_steps[0]]
        steps = sum(ring_steps(e.collective, self.devices) for e in per_block if e is not None)
        scatter = 0 if self.scatter is None else ring_steps("scatter", self.devices)
        return blocks * steps + scatter

    def flops_per_sample(self, rank: int, blocks: int) -> float:
        """All FLOPs of one sample's forward on one device."""
        per_block = sum(step.flops_per_sample for step in self.block_steps[rank])
        head = self.head_flops_per_sample if rank == 0 else 0.0
        return blocks * per_block + self.embed_flops_per_sample[rank] + head

    def activation_bytes(self, rank: int, batch: int, bytes_per_element: int) -> float:
        """Bytes beyond the weights ``rank`` holds at its peak in a forward of ``batch``."""
        return self.peak_floats_per_sample[rank] * batch * bytes_per_element


def block_flops(model: ModelSpec, q_tokens: float, kv_tokens: float) -> float:
    """FLOPs of one encoder block: Q, output and MLP on q rows; K, V on kv rows; attention."""
    d = model.width
    dense_per_q = (2 + 2 * model.mlp_ratio) * d * d  # Q, output projection, MLP up and down
    kv_proj = 2 * d * d * kv_tokens
    attention = 2 * q_tokens * kv_tokens * d  # QK^T and AV
    return 2 * (dense_per_q * q_tokens + kv_proj + attention)


def embed_flops(model: ModelSpec) -> float:
    """Patch embedding of a ViT (zero for token-embedding models)."""
    patches = model.tokens - 1
    return 2.0 * patches * model.width * model.patch_size**2 * model.channels


def head_flops(model: ModelSpec) -> float:
    """The classifier head on the CLS token."""
    return 2.0 * model.width * model.classes


def weight_bytes(model: ModelSpec, shards: int = 1) -> float:
    """Parameter bytes held by one device (blocks split over ``shards`` for tensor parallel)."""
    d = model.width
    per_block = (4 + 2 * model.mlp_ratio) * d * d + (9 + 2 * model.mlp_ratio) * d
    rest = model.patch_size**2 * model.channels * d + model.tokens * d + d * model.classes
    return model.bytes_per_element * (model.blocks * per_block / shards + rest)


def position_wise_plan(
    strategy: str,
    model: ModelSpec,
    layout: Layout,
    segments: int | None,
    input_source: InputSource,
) -> CostPlan:
    """Tokens partitioned by ``layout``: one all-gather of its (padded) rows per block.

    ``input_source`` "terminal": the terminal embeds the whole input and sends each
    device its rows; "replicated": every device already holds the input and embeds only
    the rows it needs. On one rank nothing is exchanged.
    """
    n, sizes = model.tokens, layout.partition_rows
    sent = layout.sent_rows_per_rank
    kv = tuple(layout.context_rows(p) for p in range(layout.world))
    steps = tuple(
        (BlockStep(block_flops(model, own, kv[p]) + _mean_flops(model, own, sent[p])),)
        for p, own in enumerate(sizes)
    )
    exchange: Exchange | None = None
    embed: tuple[float, ...] = (embed_flops(model),)
    embed_rows: tuple[int, ...] = (n,) + (0,) * (layout.world - 1)  # the terminal: all rows
    scatter: tuple[int, ...] | None = None
    if layout.world > 1:
        exchange = Exchange("allgather", sent, layout.padded_rows)
        if input_source == "terminal":
            embed += (0.0,) * (layout.world - 1)
            scatter = sizes
        else:
            embed = tuple(embed_flops(model) * own / n for own in sizes)
            embed_rows = sizes
    held = tuple(
        RankRows(
            own,
            kv[p],
            gathered=exchange is not None,
            extra=_held_beside_blocks(layout, p, terminal_scatters=scatter is not None),
            embedded=embed_rows[p],
            buffers=0 if exchange is None else (layout.world + 1) * layout.padded_rows,
        )
        for p, own in enumerate(sizes)
    )
    return CostPlan(
        strategy,
        sizes,
        kv,
        segments,
        steps,
        embed,
        embed_rows,
        head_flops(model),
        exchange,
        weight_bytes(model),
        scatter,
        tuple(peak_floats(model, rows) for rows in held),
    )


def _held_beside_blocks(layout: Layout, rank: int, terminal_scatters: bool) -> int:
    """Rows ``rank`` holds beside a block's own (``RankRows.extra``): its segment means,
    and on a terminal that scatters, the rest of the embedded sequence its rows are a
    view of (until block 0 replaces them)."""
    means = 0 if layout.segment_rows is None else layout.sent_rows(rank)
    rest = layout.tokens - layout.partition_rows[0] if terminal_scatters and rank == 0 else 0
    return means + rest


def _mean_flops(model: ModelSpec, own: int, segments: int) -> float:
    """Additions to reduce ``own`` rows to ``segments`` means (zero when they are the rows)."""
    return float((own - segments) * model.width)
