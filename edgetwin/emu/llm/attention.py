"""Attention arithmetic every strategy shares: masks, grouped-query attention, and the
exact combination of partial attentions over disjoint KV shards (log-sum-exp)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor


def causal_bias(
    query_positions: Tensor, key_positions: Tensor, key_log_counts: Tensor | None = None
) -> Tensor:
    """Additive logit bias [t_q, t_k]: -inf where a key comes after its query, else 0 plus
    the key's log count (log of the tokens a segment mean stands for)."""
    allowed = key_positions[None, :] <= query_positions[:, None]
    bias = torch.zeros(allowed.shape, device=allowed.device).masked_fill(~allowed, -math.inf)
    return bias if key_log_counts is None else bias + key_log_counts[None, :]


def _grouped(keys: Tensor, values: Tensor, heads: int) -> tuple[Tensor, Tensor]:
    """KV heads repeated for the query heads that share them (grouped-query attention)."""
    group = heads // keys.shape[1]
    if group == 1:
        return keys, values
    return keys.repeat_interleave(group, dim=1), values.repeat_interleave(group, dim=1)


def attend(queries: Tensor, keys: Tensor, values: Tensor, bias: Tensor | None) -> Tensor:
    """Softmax attention [B, H, t_q, d_h]; ``bias`` [t_q, t_k] or ``None`` (every key)."""
    keys, values = _grouped(keys, values, queries.shape[1])
    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=bias)


def merge_heads(heads: Tensor) -> Tensor:
    """[B, H, t, d_h] -> [B, t, H d_h]."""
    return heads.transpose(1, 2).flatten(2)


def partial_attention(query: Tensor, keys: Tensor, values: Tensor) -> Tensor:
    """One position's attention over a KV shard, unnormalised, as [B, H, d_h + 2]:
    sum_j exp(s_j - m) v_j, then the running max m, then sum_j exp(s_j - m)."""
    keys, values = _grouped(keys, values, query.shape[1])
    scores = (query @ keys.transpose(-1, -2)).squeeze(-2) / math.sqrt(query.shape[-1])
    top = scores.max(dim=-1, keepdim=True).values  # [B, H, 1]
    weights = torch.exp(scores - top)  # [B, H, n]
    summed = (weights.unsqueeze(-2) @ values).squeeze(-2)  # [B, H, d_h]
    return torch.cat([summed, top, weights.sum(dim=-1, keepdim=True)], dim=-1)


def combine_partials(parts: Tensor) -> Tensor:
    """The exact attention [B, H, 1, d_h] from P shards' partials [P, B, H, d_h + 2]."""
    summed, top, total = parts[..., :-2], parts[..., -2:-1], parts[..., -1:]
    overall = top.max(dim=0).values
    scale = torch.exp(top - overall)  # [P, B, H, 1]
    out = (scale * summed).sum(dim=0) / (scale * total).sum(dim=0)
    return out.unsqueeze(-2)
