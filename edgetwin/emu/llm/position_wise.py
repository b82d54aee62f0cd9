"""voltage and prism on a decoder: position-wise prefill, decode over the distributed KV
cache (docs/llm.md).

Prefill: rank p holds the prompt positions ``models.layout`` gives it. Before each layer
the ranks all-gather their rows' attention input (the normalised hidden rows; prism: the
means of its segments), padded to equal rows. A rank computes its own rows' queries, and
keys and values over the context: voltage, every row with the causal mask; prism, the
segment means of the ranks before it (each logit + log(segment size), a mean at its
segment's centre position) and its own rows. It keeps its own rows' keys and values.
The last rank computes token 0 and broadcasts it.

Decode: every rank runs the new position through every layer. In each attention it
attends over its own KV only and all-gathers the partial result per sequence and head
(unnormalised output, running max, sum of exponentials: B x H x (d_h + 2) values), which
every rank combines exactly. Decode step s (from 0) keeps its keys and values at rank
s mod P.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from edgetwin.emu.llm.attention import (
    attend,
    causal_bias,
    combine_partials,
    merge_heads,
    partial_attention,
)
from edgetwin.emu.llm.cache import KVCache
from edgetwin.emu.llm.generation import TOKEN_DTYPE, Generation, RankGenerator, RankSetup, greedy
from edgetwin.emu.llm.model import DecoderLayer
from edgetwin.emu.llm.timing import DECODE, PREFILL
from edgetwin.emu.vit.forward import segment_means
from edgetwin.models.decoder_costs import kept_decode_rows


class PositionWiseRank(RankGenerator):
    def __init__(self, setup: RankSetup) -> None:
        super().__init__(setup)
        self.layout = self.run.layout
        self.exchange = setup.linked
        self.layers: list[DecoderLayer] = setup.model.decoder_layers()
        self.start, self.stop = self.layout.bounds(self.rank)
        self.last = self.run.world - 1
        self._context_positions, self._context_log_counts = self._context()

    def _context(self) -> tuple[Tensor, Tensor | None]:
        """Positions of this rank's context rows and, for prism, their log counts."""
        own = self.positions(self.start, self.stop - self.start)
        segments = self.layout.segment_rows
        if segments is None:
            return self.positions(0, self.layout.tokens), None
        centres: list[float] = []
        logs: list[float] = []
        for peer in range(self.rank):
            first = self.layout.bounds(peer)[0]
            for size in segments[peer]:
                centres.append(first + (size - 1) / 2)
                logs.append(math.log(size))
                first += size
        device = self.setup.device
        before = torch.tensor(centres, dtype=torch.float32, device=device)
        counts = torch.tensor([*logs, *([0.0] * own.shape[0])], device=device)
        return torch.cat([before, own.to(torch.float32)]), counts

    def generate(self, prompt: Tensor) -> Generation:
        run = self.run
        own_rows = self.stop - self.start
        decode_rows = kept_decode_rows(self.rank, run.world, run.output_tokens - 1)
        cache = self.new_cache(len(self.layers), own_rows + decode_rows)
        ids, step_logits = self._prefill(prompt, cache)
        tokens, logits = [ids], [] if step_logits is None else [step_logits]
        kept = own_rows
        for step in range(run.output_tokens - 1):
            keeper = step % run.world == self.rank
            ids, step_logits = self._decode(ids, run.prompt_tokens + step, cache, kept, keeper)
            kept += keeper
            tokens.append(ids)
            logits.append(step_logits)
        full = len(logits) == run.output_tokens
        return Generation(torch.stack(tokens, dim=1), torch.stack(logits) if full else None)

    def _prefill(self, prompt: Tensor, cache: KVCache) -> tuple[Tensor, Tensor | None]:
        own = self.positions(self.start, self.stop - self.start)
        segments = self.layout.segment_rows
        with self.clock.phase(PREFILL, "compute"):
            rows = self.setup.model.embed(prompt[:, self.start : self.stop], own)
        bias = causal_bias(own.to(torch.float32), self._context_positions, self._context_log_counts)
        for index, layer in enumerate(self.layers):
            attn = layer.self_attn
            with self.clock.phase(PREFILL, "compute"):
                normed = layer.input_layernorm(rows)
                payload = normed if segments is None else segment_means(normed, segments[self.rank])
            gathered = self.exchange.all_gather_rows(PREFILL, payload, self.layout.padded_rows)
            with self.clock.phase(PREFILL, "stage_in"):
                context = self._assemble(gathered, normed)
            with self.clock.phase(PREFILL, "compute"):
                keys, values = attn.keys_values(context, self._context_positions)
                own_from = keys.shape[2] - own.shape[0] if segments is not None else self.start
                own_to = own_from + own.shape[0]
                cache.put(index, keys[:, :, own_from:own_to], values[:, :, own_from:own_to], 0)
                attended = attend(attn.queries(normed, own), keys, values, bias)
                rows = rows + attn.o_proj(merge_heads(attended))
                rows = rows + layer.feed_forward(rows)
        logits = None
        ids = torch.empty(self.run.batch, dtype=TOKEN_DTYPE, device=self.setup.device)
        if self.rank == self.last:
            with self.clock.phase(PREFILL, "compute"):
                logits = self.setup.model.logits(rows[:, -1])
                ids = greedy(logits)
        ids = self.exchange.broadcast(PREFILL, ids, self.last)
        self.clock.token_held()
        return ids, logits

    def _assemble(self, gathered: Tensor, normed: Tensor) -> Tensor:
        """The context rows in position order: voltage, every rank's rows (its own in its
        place); prism, the means of the ranks before it, then its own rows."""
        if self.layout.segment_rows is None:
            pieces = [
                normed if peer == self.rank else gathered[peer][:, : self.layout.sent_rows(peer)]
                for peer in range(self.layout.world)
            ]
        else:
            pieces = [gathered[peer][:, : self.layout.sent_rows(peer)] for peer in range(self.rank)]
            pieces.append(normed)
        return torch.cat(pieces, dim=1)

    def _decode(
        self, ids: Tensor, position: int, cache: KVCache, kept: int, keeper: bool
    ) -> tuple[Tensor, Tensor]:
        """One decode step over the distributed KV; every rank ends with the same token."""
        where = self.positions(position)
        with self.clock.phase(DECODE, "compute"):
            rows = self.setup.model.embed(ids[:, None], where)
        stop = kept + keeper
        for index, layer in enumerate(self.layers):
            attn = layer.self_attn
            with self.clock.phase(DECODE, "compute"):
                normed = layer.input_layernorm(rows)
                query = attn.queries(normed, where)
                if keeper:
                    cache.put(index, *attn.keys_values(normed, where), kept)
                partial = partial_attention(query, *cache.view(index, stop))
            parts = self.exchange.all_gather(DECODE, partial)
            with self.clock.phase(DECODE, "compute"):
                rows = rows + attn.o_proj(merge_heads(combine_partials(parts)))
                rows = rows + layer.feed_forward(rows)
        with self.clock.phase(DECODE, "compute"):
            logits = self.setup.model.logits(rows[:, -1])
            ids = greedy(logits)
        self.clock.token_held()
        return ids, logits
