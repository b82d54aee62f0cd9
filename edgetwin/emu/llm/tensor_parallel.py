"""tensor_parallel (Megatron): each rank holds H/P query heads, H_kv/P KV heads and a
share of the FFN columns of every layer; two all-reduces (sum) of [B, t, D] per layer,
after the attention output projection and after the FFN down projection (docs/llm.md).

The output and down projections' biases are added once, after the sum. Embedding, final
norm and LM head are replicated: every rank computes the same token.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from edgetwin.decoder_spec import DecoderSpec
from edgetwin.emu.llm.attention import attend, causal_bias, merge_heads
from edgetwin.emu.llm.cache import KVCache
from edgetwin.emu.llm.generation import Generation, RankGenerator, RankSetup
from edgetwin.emu.llm.model import DecoderLayer
from edgetwin.emu.llm.timing import Part
from edgetwin.models.layout import partition_sizes


def _copy_rows(part: nn.Linear, whole: nn.Linear, start: int, stop: int) -> None:
    part.weight.copy_(whole.weight[start:stop])
    if whole.bias is not None and part.bias is not None:
        part.bias.copy_(whole.bias[start:stop])


def shard_layer(spec: DecoderSpec, layer: DecoderLayer, rank: int, world: int) -> DecoderLayer:
    """``rank``'s share of ``layer``: its heads' Q, K, V rows and output columns, its FFN
    columns (contiguous); norms copied; no output or down bias (added after the sum)."""
    size = spec.head_dim
    heads, kv_heads = spec.heads // world, spec.kv_heads // world
    columns = partition_sizes(spec.ffn_size, world)
    f0 = sum(columns[:rank])
    f1 = f0 + columns[rank]
    q0, q1 = rank * heads * size, (rank + 1) * heads * size
    k0, k1 = rank * kv_heads * size, (rank + 1) * kv_heads * size
    shard = DecoderLayer(spec, heads, kv_heads, columns[rank], out_bias=False)
    whole_attn, part_attn = layer.self_attn, shard.self_attn
    with torch.no_grad():
        _copy_rows(part_attn.q_proj, whole_attn.q_proj, q0, q1)
        _copy_rows(part_attn.k_proj, whole_attn.k_proj, k0, k1)
        _copy_rows(part_attn.v_proj, whole_attn.v_proj, k0, k1)
        part_attn.o_proj.weight.copy_(whole_attn.o_proj.weight[:, q0:q1])
        _copy_rows(shard.mlp.up_proj, layer.mlp.up_proj, f0, f1)
        if layer.mlp.gate_proj is not None and shard.mlp.gate_proj is not None:
            _copy_rows(shard.mlp.gate_proj, layer.mlp.gate_proj, f0, f1)
        shard.mlp.down_proj.weight.copy_(layer.mlp.down_proj.weight[:, f0:f1])
        shard.input_layernorm.load_state_dict(layer.input_layernorm.state_dict())
        shard.post_attention_layernorm.load_state_dict(layer.post_attention_layernorm.state_dict())
    shard.requires_grad_(False)
    return shard.to(whole_attn.q_proj.weight.device)


class TensorParallelRank(RankGenerator):
    def __init__(self, setup: RankSetup) -> None:
        super().__init__(setup)
        spec, world = self.run.spec, self.run.world
        whole = setup.model.decoder_layers()
        self.shards = [shard_layer(spec, layer, self.rank, world) for layer in whole]
        self.out_biases = [layer.self_attn.o_proj.bias for layer in whole]
        self.down_biases = [layer.mlp.down_proj.bias for layer in whole]
        self.exchange = setup.linked

    def generate(self, prompt: Tensor) -> Generation:
        run = self.run
        kv_heads = run.spec.kv_heads // run.world
        cache = self.new_cache(len(self.shards), self.kept_positions, kv_heads)

        def layers(part: Part, rows: Tensor, first: int) -> Tensor:
            for index, shard in enumerate(self.shards):
                rows = self._layer(part, index, shard, rows, first, cache)
            return rows

        return self.greedy_loop(prompt, layers)

    def _layer(
        self,
        part: Part,
        index: int,
        shard: DecoderLayer,
        rows: Tensor,
        first: int,
        cache: KVCache,
    ) -> Tensor:
        count = rows.shape[1]
        positions = self.positions(first, count)
        with self.clock.phase(part, "compute"):
            normed = shard.input_layernorm(rows)
            keys, values = shard.self_attn.keys_values(normed, positions)
            cache.put(index, keys, values, first)
            keys, values = cache.view(index, first + count)
            every = self.positions(0, first + count)
            bias = causal_bias(positions, every) if count > 1 else None
            attended = attend(shard.self_attn.queries(normed, positions), keys, values, bias)
            partial = shard.self_attn.o_proj(merge_heads(attended))
        rows = rows + self._summed(part, partial, self.out_biases[index])
        with self.clock.phase(part, "compute"):
            partial = shard.feed_forward(rows)
        return rows + self._summed(part, partial, self.down_biases[index])

    def _summed(self, part: Part, partial: Tensor, bias: Tensor | None) -> Tensor:
        total = self.exchange.all_reduce(part, partial)
        return total if bias is None else total + bias
