"""A decoder LLM in torch, built from a ``DecoderSpec``: GPT-2, Llama and Qwen2 kinds.

GPT-2 kind: LayerNorm, a learned position table, a GELU MLP, biases everywhere. Llama
kind: RMSNorm, rotary positions, a SwiGLU MLP, grouped-query attention, no biases
(Qwen2: biases on Q, K and V). Parameter names follow Hugging Face's Llama
(``embed_tokens``, ``layers.i.self_attn.q_proj``, ``mlp.down_proj``, ``norm``,
``lm_head``), so such a state_dict with its ``model.`` prefix removed loads as is (its
outputs differ where the model's rotary base is not ROPE_BASE). A
tied head reuses ``embed_tokens.weight``. The real code runs fp32 whatever the spec's
dtypes say.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from edgetwin.decoder_spec import DecoderSpec
from edgetwin.emu.llm.attention import attend, causal_bias, merge_heads
from edgetwin.emu.llm.runs import model_problem
from edgetwin.emu.torch_weights import with_weights

NORM_EPS = 1e-5
ROPE_BASE = 10_000.0  # the spec has no rotary base: one fixed value (cost and exactness agree)
INIT_STD = 0.02
PROMPT_SEED_OFFSET = 1_000_003  # prompts and weights come from different streams of one seed


class RMSNorm(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, rows: Tensor) -> Tensor:
        scale = torch.rsqrt(rows.pow(2).mean(-1, keepdim=True) + NORM_EPS)
        out: Tensor = rows * scale * self.weight
        return out


def make_norm(spec: DecoderSpec) -> nn.Module:
    if spec.norm == "layernorm":
        return nn.LayerNorm(spec.width, eps=NORM_EPS)
    return RMSNorm(spec.width)


def rotate(heads: Tensor, positions: Tensor) -> Tensor:
    """Rotary embedding of ``heads`` [B, h, t, d_h] at ``positions`` [t] (float positions
    allowed: a segment mean sits at its segment's centre); Hugging Face's half-split form."""
    half = heads.shape[-1] // 2
    freqs = ROPE_BASE ** (-torch.arange(half, dtype=torch.float32, device=heads.device) / half)
    angles = positions.to(torch.float32)[:, None] * freqs[None, :]
    cos = torch.cat([angles.cos(), angles.cos()], dim=-1)
    sin = torch.cat([angles.sin(), angles.sin()], dim=-1)
    turned = torch.cat([-heads[..., half:], heads[..., :half]], dim=-1)
    return heads * cos + turned * sin


class Attention(nn.Module):
    """Causal self-attention projections of ``heads`` query heads and ``kv_heads`` KV heads
    (a tensor-parallel rank holds a share of each)."""

    def __init__(self, spec: DecoderSpec, heads: int, kv_heads: int, out_bias: bool) -> None:
        super().__init__()
        size = spec.head_dim
        qkv_bias = spec.bias in ("all", "qkv")
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, size
        self.rotary = spec.positions == "rope"
        self.q_proj = nn.Linear(spec.width, heads * size, bias=qkv_bias)
        self.k_proj = nn.Linear(spec.width, kv_heads * size, bias=qkv_bias)
        self.v_proj = nn.Linear(spec.width, kv_heads * size, bias=qkv_bias)
        self.o_proj = nn.Linear(heads * size, spec.width, bias=out_bias)

    def queries(self, normed: Tensor, positions: Tensor) -> Tensor:
        """[B, heads, t, d_h] from the normalised rows [B, t, D] at ``positions`` [t]."""
        return self._positioned(self._split(self.q_proj(normed), self.heads), positions)

    def keys_values(self, normed: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        """Keys (rotated if rotary) and values, [B, kv_heads, t, d_h] each."""
        keys = self._positioned(self._split(self.k_proj(normed), self.kv_heads), positions)
        return keys, self._split(self.v_proj(normed), self.kv_heads)

    def _split(self, rows: Tensor, heads: int) -> Tensor:
        batch, count, _ = rows.shape
        return rows.reshape(batch, count, heads, self.head_dim).transpose(1, 2)

    def _positioned(self, heads: Tensor, positions: Tensor) -> Tensor:
        return rotate(heads, positions) if self.rotary else heads


class Mlp(nn.Module):
    """GELU (``up_proj``, ``down_proj``) or SwiGLU (``gate_proj`` too) over ``hidden`` columns."""

    def __init__(self, spec: DecoderSpec, hidden: int, out_bias: bool) -> None:
        super().__init__()
        bias = spec.bias == "all"
        self.gated = spec.ffn == "swiglu"
        self.gate_proj = nn.Linear(spec.width, hidden, bias=bias) if self.gated else None
        self.up_proj = nn.Linear(spec.width, hidden, bias=bias)
        self.down_proj = nn.Linear(hidden, spec.width, bias=out_bias)

    def forward(self, rows: Tensor) -> Tensor:
        if self.gate_proj is not None:
            inner = F.silu(self.gate_proj(rows)) * self.up_proj(rows)
        else:
            inner = F.gelu(self.up_proj(rows), approximate="tanh")
        out: Tensor = self.down_proj(inner)
        return out


class DecoderLayer(nn.Module):
    """Pre-norm block: h + attention(norm h), then + mlp(norm h)."""

    def __init__(
        self,
        spec: DecoderSpec,
        heads: int | None = None,
        kv_heads: int | None = None,
        ffn_size: int | None = None,
        out_bias: bool | None = None,
    ) -> None:
        super().__init__()
        with_bias = spec.bias == "all" if out_bias is None else out_bias
        self.input_layernorm = make_norm(spec)
        self.self_attn = Attention(
            spec, heads or spec.heads, kv_heads or spec.kv_heads, out_bias=with_bias
        )
        self.post_attention_layernorm = make_norm(spec)
        self.mlp = Mlp(spec, ffn_size or spec.ffn_size, out_bias=with_bias)

    def feed_forward(self, rows: Tensor) -> Tensor:
        out: Tensor = self.mlp(self.post_attention_layernorm(rows))
        return out


class Decoder(nn.Module):
    """Token embedding (+ learned positions), decoder layers, final norm, LM head."""

    def __init__(self, spec: DecoderSpec) -> None:
        super().__init__()
        unbuildable = model_problem(spec)
        if unbuildable is not None:
            raise ValueError(unbuildable[1])
        self.spec = spec
        self.embed_tokens = nn.Embedding(spec.vocab, spec.width)
        learned = spec.positions == "learned"
        self.embed_positions = nn.Embedding(spec.max_positions, spec.width) if learned else None
        self.layers = nn.ModuleList(DecoderLayer(spec) for _ in range(spec.layers))
        self.norm = make_norm(spec)
        untied = not spec.tied_embeddings
        self.lm_head = nn.Linear(spec.width, spec.vocab, bias=False) if untied else None

    def decoder_layers(self) -> list[DecoderLayer]:
        return [layer for layer in self.layers if isinstance(layer, DecoderLayer)]

    def embed(self, ids: Tensor, positions: Tensor) -> Tensor:
        """Rows [B, t, D] of token ``ids`` [B, t] at integer ``positions`` [t]."""
        rows: Tensor = self.embed_tokens(ids)
        if self.embed_positions is not None:
            rows = rows + self.embed_positions(positions)
        return rows

    def logits(self, rows: Tensor) -> Tensor:
        """Logits [..., V] of final hidden rows [..., D]."""
        head = self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(self.norm(rows), head)

    def forward(self, ids: Tensor) -> Tensor:
        """Logits [B, t, V] of every position, recomputed from scratch (no cache)."""
        positions = torch.arange(ids.shape[1], device=ids.device)
        rows = self.embed(ids, positions)
        bias = causal_bias(positions, positions)
        for layer in self.decoder_layers():
            normed = layer.input_layernorm(rows)
            keys, values = layer.self_attn.keys_values(normed, positions)
            queries = layer.self_attn.queries(normed, positions)
            rows = rows + layer.self_attn.o_proj(merge_heads(attend(queries, keys, values, bias)))
            rows = rows + layer.feed_forward(rows)
        return self.logits(rows)


def build_decoder(
    spec: DecoderSpec,
    seed: int = 0,
    weights: Path | None = None,
    device: torch.device | str = "cpu",
) -> Decoder:
    """An inference-mode decoder: seeded random weights, or a state_dict from ``weights``."""
    return with_weights(Decoder(spec), _init_random, seed, weights, device)


def _init_random(model: Decoder, seed: int) -> None:
    """From one generator: norm weights 1; projection matrices normal with variance
    1 / fan-in (each layer's output has its input's scale, so every layer, not the
    token's own embedding alone, decides the next token); embeddings and biases normal
    with INIT_STD."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                param.fill_(1.0)
            elif name.endswith("proj.weight"):
                param.normal_(0.0, param.shape[1] ** -0.5, generator=generator)
            else:
                param.normal_(0.0, INIT_STD, generator=generator)


def make_prompt(spec: DecoderSpec, batch: int, prompt_tokens: int, seed: int = 0) -> Tensor:
    """Seeded random prompt token ids [B, T] (int64)."""
    generator = torch.Generator().manual_seed(seed + PROMPT_SEED_OFFSET)
    return torch.randint(0, spec.vocab, (batch, prompt_tokens), generator=generator)
