"""Cost structure of each strategy: pure functions, no event loop.

For a model and a strategy on P devices this says, per device and per block,
how many FLOPs the device does (from the tokens it computes queries for and
the tokens it attends over) and which tensors cross the network. FLOPs count
a multiply-add as two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from edgetwin.scenario import ModelSpec

Collective = Literal["allgather", "allreduce", "scatter"]
InputSource = Literal["terminal", "replicated"]


@dataclass(frozen=True)
class Exchange:
    """One collective per block; ``rows_per_rank`` is each rank's contribution (per sample)."""

    collective: Collective
    rows_per_rank: tuple[int, ...]


@dataclass(frozen=True)
class BlockStep:
    """A piece of a block on one device: FLOPs per sample, then an optional exchange."""

    flops_per_sample: float
    exchange_after: Exchange | None = None


@dataclass(frozen=True)
class Plan:
    """Work of a whole forward: per-device block steps plus embedding and head on rank 0."""

    strategy: str
    partition_tokens: tuple[int, ...]
    kv_tokens: tuple[int, ...]
    segments: int | None
    block_steps: tuple[tuple[BlockStep, ...], ...]  # [device][step]
    embed_flops_per_sample: tuple[float, ...]  # per device
    head_flops_per_sample: float
    exchange_before_block: Exchange | None
    weight_bytes_per_device: float
    scatter_rows: tuple[int, ...] | None  # rows the terminal sends each device, if it does

    @property
    def devices(self) -> int:
        return len(self.partition_tokens)

    def flops_per_sample(self, rank: int, blocks: int) -> float:
        """All FLOPs of one sample's forward on one device."""
        per_block = sum(step.flops_per_sample for step in self.block_steps[rank])
        head = self.head_flops_per_sample if rank == 0 else 0.0
        return blocks * per_block + self.embed_flops_per_sample[rank] + head


def partition_sizes(tokens: int, devices: int) -> tuple[int, ...]:
    """Contiguous partitions; the first ones (the terminal first) take the remainder."""
    base, extra = divmod(tokens, devices)
    return tuple(base + (1 if p < extra else 0) for p in range(devices))


def segments_for_cr(tokens: int, devices: int, cr: float) -> int:
    """Segments per partition L for a compression ratio CR = N / (L P)."""
    return max(1, round(tokens / (cr * devices)))


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


def weight_bytes(model: ModelSpec, shards: int = 1) -> float:
    """Parameter bytes held by one device (blocks split over ``shards`` for tensor parallel)."""
    d = model.width
    per_block = (4 + 2 * model.mlp_ratio) * d * d + (9 + 2 * model.mlp_ratio) * d
    rest = model.patch_size**2 * model.channels * d + model.tokens * d + d * model.classes
    return model.bytes_per_element * (model.blocks * per_block / shards + rest)


def plan(
    model: ModelSpec,
    strategy: str,
    devices: int,
    segments: int | None = None,
    input_source: InputSource = "terminal",
) -> Plan:
    """The cost structure of ``strategy`` on ``devices`` devices.

    ``input_source`` "terminal": the terminal embeds the whole input and sends
    each device its rows; "replicated": every device already holds the input
    and embeds only the rows it needs.
    """
    n = model.tokens
    head = 2.0 * model.width * model.classes
    if strategy == "single":
        whole = ((BlockStep(block_flops(model, n, n)),),)
        return Plan(
            strategy,
            (n,),
            (n,),
            None,
            whole,
            (embed_flops(model),),
            head,
            None,
            weight_bytes(model),
            None,
        )
    if devices < 2:
        raise ValueError(f"{strategy} needs at least 2 devices")
    if strategy == "tensor_parallel":
        return _tensor_parallel(model, devices, head, input_source)
    sizes = partition_sizes(n, devices)
    if strategy == "voltage":
        sent = sizes
    elif strategy == "prism":
        if segments is None or segments < 1:
            raise ValueError("prism needs segments >= 1")
        sent = tuple(min(segments, size) for size in sizes)
    else:
        raise ValueError(f"unknown strategy {strategy!r}")
    kv = tuple(own + sum(sent) - sent[p] for p, own in enumerate(sizes))
    steps = tuple(
        (BlockStep(block_flops(model, own, kv[p]) + _mean_flops(model, own, sent[p])),)
        for p, own in enumerate(sizes)
    )
    exchange = Exchange("allgather", sent)
    if input_source == "terminal":
        embed = (embed_flops(model),) + (0.0,) * (devices - 1)
        scatter: tuple[int, ...] | None = sizes
    else:
        embed = tuple(embed_flops(model) * own / n for own in sizes)
        scatter = None
    return Plan(
        strategy, sizes, kv, segments, steps, embed, head, exchange, weight_bytes(model), scatter
    )


def _mean_flops(model: ModelSpec, own: int, segments: int) -> float:
    """Additions to reduce ``own`` rows to ``segments`` means (zero at segment size 1)."""
    return float((own - segments) * model.width)


def _tensor_parallel(
    model: ModelSpec, devices: int, head: float, input_source: InputSource
) -> Plan:
    """Megatron style: heads and MLP columns split; two AllReduce of [N, D] per block."""
    n, d = model.tokens, model.width
    attention = 2 * (4 * d * d * n + 2 * n * n * d) / devices
    mlp = 2 * (2 * model.mlp_ratio * d * d * n) / devices
    reduce = Exchange("allreduce", (n,) * devices)
    step = (BlockStep(attention, reduce), BlockStep(mlp, reduce))
    rows = (n,) * devices
    terminal = input_source == "terminal"
    embed = (embed_flops(model),) + ((0.0,) if terminal else (embed_flops(model),)) * (devices - 1)
    return Plan(
        "tensor_parallel",
        rows,
        rows,
        None,
        (step,) * devices,
        embed,
        head,
        None,
        weight_bytes(model, devices),
        rows if terminal else None,
    )
