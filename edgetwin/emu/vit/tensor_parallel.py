"""One rank's forward for tensor_parallel (Megatron style): every rank holds every row and
a share of each block's heads (their Q, K and V rows of ``qkv``, their columns of
``proj``) and of its MLP's hidden columns (``partition_sizes``: the larger shares first);
two all-reduces (sum) of [B, N, D] a block, after the attention's projection and after
the MLP's ``fc2``, whose biases are added once, after the sum.

GLOO moves host tensors, so each all-reduce is staged as the position-wise exchange is
(``stage_out``, ``comm``, ``stage_in``). The input: every rank embeds the whole sequence
(replicated), or the terminal embeds it and sends every other rank all of it
(``terminal``; the twin's scatter of N rows to each). The terminal returns the logits.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from edgetwin.emu.vit.exchange import HOST
from edgetwin.emu.vit.forward import InputSource
from edgetwin.emu.vit.model import EncoderBlock, ViT
from edgetwin.emu.vit.phases import PhaseClock
from edgetwin.models.layout import partition_sizes


def _share(sizes: Sequence[int], rank: int) -> tuple[int, int]:
    """Where ``rank``'s share starts and stops, the ranks' ``sizes`` laid end to end."""
    start = sum(sizes[:rank])
    return start, start + sizes[rank]


class BlockShard:
    """``rank``'s share of one encoder block, its weights copied out of the whole block."""

    def __init__(self, block: EncoderBlock, rank: int, world: int) -> None:
        attn, mlp = block.attn, block.mlp
        width = attn.proj.weight.shape[0]
        head_size = width // attn.heads
        heads = partition_sizes(attn.heads, world)
        self.heads = heads[rank]
        h0, h1 = (head * head_size for head in _share(heads, rank))
        f0, f1 = _share(partition_sizes(mlp.fc1.weight.shape[0], world), rank)
        rows = torch.cat([torch.arange(h0, h1) + part * width for part in range(3)])
        rows = rows.to(attn.qkv.weight.device)
        self.qkv_weight = attn.qkv.weight[rows].contiguous()  # Q, K, V rows of its heads
        self.qkv_bias = attn.qkv.bias[rows].contiguous()
        self.proj_weight = attn.proj.weight[:, h0:h1].contiguous()
        self.proj_bias = attn.proj.bias  # added once, after the sum
        self.fc1_weight = mlp.fc1.weight[f0:f1].contiguous()
        self.fc1_bias = mlp.fc1.bias[f0:f1].contiguous()
        self.fc2_weight = mlp.fc2.weight[:, f0:f1].contiguous()
        self.fc2_bias = mlp.fc2.bias
        self.block = block  # its norms, which every rank applies to every row

    def attention(self, rows: Tensor) -> Tensor:
        """This rank's heads over every row: its part of the projection's sum."""
        batch, count, _ = rows.shape
        qkv = F.linear(self.block.attention_input(rows), self.qkv_weight, self.qkv_bias)
        q, k, v = (
            part.reshape(batch, count, self.heads, -1).transpose(1, 2)
            for part in qkv.chunk(3, dim=-1)
        )
        attended = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)
        return F.linear(attended, self.proj_weight)

    def mlp(self, rows: Tensor) -> Tensor:
        """This rank's hidden columns: its part of ``fc2``'s sum."""
        hidden = F.gelu(F.linear(self.block.norm2(rows), self.fc1_weight, self.fc1_bias))
        return F.linear(hidden, self.fc2_weight)


class TensorParallelForward:
    """The part of a forward that ``rank`` of ``world`` does for tensor_parallel."""

    def __init__(
        self,
        model: ViT,
        rank: int,
        world: int,
        batch: int,
        clock: PhaseClock,
        input_source: InputSource = "terminal",
    ) -> None:
        self.model = model
        self.rank = rank
        self.world = world
        self.batch = batch
        self.clock = clock
        self.input_source = input_source
        self.device = model.pos_embed.device
        self.shards = [BlockShard(block, rank, world) for block in model.encoder_blocks()]
        self.bytes_sent = 0  # what this rank put into sends and all-reduces, last forward

    def __call__(self, images: Tensor | None) -> Tensor | None:
        """``images`` where this rank embeds (terminal, or every rank if replicated)."""
        self.bytes_sent = 0
        rows = self._embed(images)
        for index, shard in enumerate(self.shards):
            step = f"block{index}"
            with self.clock.phase(step, "compute"):
                partial = shard.attention(rows)
            summed = self._summed(step, partial)
            with self.clock.phase(step, "compute"):
                rows = rows + summed + shard.proj_bias
                partial = shard.mlp(rows)
            summed = self._summed(step, partial)
            with self.clock.phase(step, "compute"):
                rows = rows + summed + shard.fc2_bias
        if self.rank != 0:
            return None
        with self.clock.phase("head", "compute"):
            return self.model.classify(rows[:, 0])

    def _embed(self, images: Tensor | None) -> Tensor:
        tokens = self.model.spec.tokens
        if self.rank != 0 and self.input_source == "terminal":
            host = torch.empty(self.batch, tokens, self.model.spec.width)
            with self.clock.phase("embed", "comm"):
                dist.recv(host, src=0)
            with self.clock.phase("embed", "stage_in"):
                return host.to(self.device)
        if images is None:
            raise ValueError(f"rank {self.rank} embeds the whole sequence and needs the images")
        with self.clock.phase("embed", "compute"):
            rows = self.model.embed_rows(images, 0, tokens)
        if self.input_source == "terminal":  # rank 0: every other rank gets all of it
            with self.clock.phase("embed", "stage_out"):
                host = rows.to(HOST).contiguous()
            with self.clock.phase("embed", "comm"):
                sends = [dist.isend(host, dst=peer) for peer in range(1, self.world)]
                for work in sends:
                    if work is not None:  # None only when this rank is outside the group
                        work.wait()
            self.bytes_sent += host.nbytes * (self.world - 1)
        return rows

    def _summed(self, step: str, partial: Tensor) -> Tensor:
        """``partial`` summed over the ranks (an all-reduce on the host)."""
        with self.clock.phase(step, "stage_out"):
            host = partial.to(HOST).contiguous()
        with self.clock.phase(step, "comm"):
            dist.all_reduce(host)
        self.bytes_sent += host.nbytes
        with self.clock.phase(step, "stage_in"):
            return host.to(self.device)
