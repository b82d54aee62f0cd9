"""What every strategy's rank does: its part of greedy generation, and the pieces they
share (a layer over new positions with its KV cached, greedy decoding in one process).

Prefill runs the prompt's T positions and yields token 0 from the last position; then
``output_tokens - 1`` decode steps each run one new position per sequence.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from edgetwin.decoder_spec import kept_positions
from edgetwin.emu.llm.attention import attend, causal_bias, merge_heads
from edgetwin.emu.llm.cache import ALL, KVCache
from edgetwin.emu.llm.exchange import Exchange
from edgetwin.emu.llm.model import Decoder, DecoderLayer
from edgetwin.emu.llm.runs import DecoderRun
from edgetwin.emu.llm.timing import DECODE, PREFILL, GenerationClock, Part

TOKEN_DTYPE = torch.int64  # token ids on the wire
# a rank's layers over new rows: (part, rows [B, t, D], first position) -> rows
Layers = Callable[[Part, Tensor, int], Tensor]


@dataclass(frozen=True)
class Generation:
    """What a rank ends with: the tokens [B, O] and the logits [O, B, V] it holds."""

    tokens: Tensor | None
    logits: Tensor | None


@dataclass(frozen=True)
class RankSetup:
    """One rank of a run: the whole model (a rank keeps what its strategy needs), its
    clock and its exchange (``None`` on one rank)."""

    run: DecoderRun
    model: Decoder
    rank: int
    clock: GenerationClock
    exchange: Exchange | None

    @property
    def device(self) -> torch.device:
        return self.model.embed_tokens.weight.device

    @property
    def linked(self) -> Exchange:
        if self.exchange is None:
            raise ValueError(f"{self.run.strategy} needs a process group")
        return self.exchange


class RankGenerator(ABC):
    """One rank's part of a strategy's generation."""

    def __init__(self, setup: RankSetup) -> None:
        self.setup = setup
        self.run = setup.run
        self.rank = setup.rank
        self.clock = setup.clock
        self.kv_cache_bytes = 0  # the last cache ``new_cache`` made

    @property
    def kept_positions(self) -> int:
        """The positions a sequence's cache keeps at its peak (docs/llm.md's Memory)."""
        return kept_positions(self.run.prompt_tokens, self.run.output_tokens)

    def new_cache(self, layers: int, slots: int, kv_heads: int | None = None) -> KVCache:
        """A cache of ``slots`` positions per sequence (what the contract says this rank
        keeps, no more); its bytes are ``kv_cache_bytes``."""
        spec = self.run.spec
        heads = spec.kv_heads if kv_heads is None else kv_heads
        cache = KVCache(layers, self.run.batch, heads, spec.head_dim, slots, self.setup.device)
        self.kv_cache_bytes = cache.nbytes
        return cache

    def positions(self, first: int, count: int = 1) -> Tensor:
        return torch.arange(first, first + count, device=self.setup.device)

    @abstractmethod
    def generate(self, prompt: Tensor) -> Generation:
        """Run this rank's part for ``prompt`` [B, T] (every rank knows the prompt)."""

    def greedy_loop(self, prompt: Tensor, layers: Layers) -> Generation:
        """Prefill over ``prompt``, then one decode step per further token, every rank
        with the whole embedding and LM head (compute) around its ``layers``."""
        model = self.setup.model
        tokens, logits = [], []
        ids, first, part = prompt, 0, PREFILL
        for _ in range(self.run.output_tokens):
            with self.clock.phase(part, "compute"):
                rows = model.embed(ids, self.positions(first, ids.shape[1]))
            rows = layers(part, rows, first)
            with self.clock.phase(part, "compute"):
                step_logits = model.logits(rows[:, -1])
                next_ids = greedy(step_logits)
            self.clock.token_held()
            tokens.append(next_ids)
            logits.append(step_logits)
            first += ids.shape[1]
            ids, part = next_ids[:, None], DECODE
        return Generation(torch.stack(tokens, dim=1), torch.stack(logits))


def cached_layer(
    layer: DecoderLayer,
    rows: Tensor,
    first: int,
    cache: KVCache,
    index: int,
    batch: slice = ALL,
) -> Tensor:
    """``layer`` over rows [b, t, D] at positions ``first`` .. + t (slots = positions),
    attending causally over the cache after storing their keys and values."""
    count = rows.shape[1]
    positions = torch.arange(first, first + count, device=rows.device)
    normed = layer.input_layernorm(rows)
    keys, values = layer.self_attn.keys_values(normed, positions)
    cache.put(index, keys, values, first, batch)
    keys, values = cache.view(index, first + count, batch)
    every = torch.arange(first + count, device=rows.device)
    bias = causal_bias(positions, every) if count > 1 else None
    attended = attend(layer.self_attn.queries(normed, positions), keys, values, bias)
    rows = rows + layer.self_attn.o_proj(merge_heads(attended))
    return rows + layer.feed_forward(rows)


def greedy(logits: Tensor) -> Tensor:
    """Token ids [B] from last-position logits [B, V]."""
    return logits.argmax(dim=-1)


class SingleRank(RankGenerator):
    """single: the whole model in one process; also the reference every strategy meets."""

    def generate(self, prompt: Tensor) -> Generation:
        model, spec = self.setup.model, self.run.spec
        cache = self.new_cache(spec.layers, self.kept_positions)

        def layers(part: Part, rows: Tensor, first: int) -> Tensor:
            with self.clock.phase(part, "compute"):
                for index, layer in enumerate(model.decoder_layers()):
                    rows = cached_layer(layer, rows, first, cache, index)
            return rows

        return self.greedy_loop(prompt, layers)
