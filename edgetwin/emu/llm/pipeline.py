"""pipeline: contiguous layer ranges, one per rank (docs/llm.md).

Rank 0 embeds; the last rank holds the final norm and the LM head. Prefill sends the
hidden states [B, T, D] from stage to stage and the B first tokens back to rank 0.
Each decode step cuts the batch into m = min(B, P) micro-batches and sends [b, 1, D]
per micro-batch between stages and b token ids back to rank 0. Sends do not wait, and
rank 0 takes micro-batch j's token just before it runs j's next step, so while one
micro-batch is on a later stage the earlier stages run the next.
"""

from __future__ import annotations

import torch
from torch import Tensor

from edgetwin.emu.llm.cache import KVCache
from edgetwin.emu.llm.generation import (
    TOKEN_DTYPE,
    Generation,
    RankGenerator,
    RankSetup,
    cached_layer,
    greedy,
)
from edgetwin.emu.llm.model import DecoderLayer
from edgetwin.emu.llm.timing import DECODE, PREFILL, Part
from edgetwin.models.layout import partition_sizes


def micro_batches(batch: int, world: int) -> list[slice]:
    """The m = min(B, P) micro-batches of near-equal size, in order."""
    slices, start = [], 0
    for size in partition_sizes(batch, min(batch, world)):
        slices.append(slice(start, start + size))
        start += size
    return slices


def _size(part: slice) -> int:
    return int(part.stop) - int(part.start)


class PipelineRank(RankGenerator):
    """Rank 0 (embedding and the first layers), a middle stage, or the last (LM head)."""

    def __init__(self, setup: RankSetup) -> None:
        super().__init__(setup)
        sizes = self.run.stage_layers
        start = sum(sizes[: self.rank])
        self.layers: list[DecoderLayer] = setup.model.decoder_layers()[
            start : start + sizes[self.rank]
        ]
        self.last = self.run.world - 1
        self.exchange = setup.linked
        self.batches = micro_batches(self.run.batch, self.run.world)
        self.cache: KVCache | None = None

    def generate(self, prompt: Tensor) -> Generation:
        run = self.run
        self.cache = self.new_cache(len(self.layers), self.kept_positions)
        if self.rank == 0:
            return self._first(prompt)
        held, logits = [], []
        everything = slice(0, run.batch)
        for step in range(run.output_tokens):
            part: Part = PREFILL if step == 0 else DECODE
            count = run.prompt_tokens if step == 0 else 1
            first = 0 if step == 0 else run.prompt_tokens + step - 1
            step_ids, step_logits = [], []
            for batch in [everything] if step == 0 else self.batches:
                shape = (_size(batch), count, run.spec.width)
                rows = self.exchange.recv(part, shape, torch.float32, self.rank - 1)
                rows = self._layers(part, rows, first, batch)
                if self.rank != self.last:
                    self.exchange.send(part, rows, self.rank + 1)
                    continue
                with self.clock.phase(part, "compute"):
                    out = self.setup.model.logits(rows[:, -1])
                    ids = greedy(out)
                self.exchange.send(part, ids, 0)
                step_ids.append(ids)
                step_logits.append(out)
            self.exchange.flush(part)
            self.clock.token_held()  # this rank's part of the token is done
            if step_ids:
                held.append(torch.cat(step_ids))
                logits.append(torch.cat(step_logits))
        if self.rank != self.last:
            return Generation(None, None)
        return Generation(torch.stack(held, dim=1), torch.stack(logits))

    def _first(self, prompt: Tensor) -> Generation:
        """Rank 0: embeds every step's tokens and receives them back from the last rank."""
        run = self.run
        rows = self._embed(PREFILL, prompt, 0)
        self.exchange.send(PREFILL, self._layers(PREFILL, rows, 0, slice(0, run.batch)), 1)
        self.exchange.flush(PREFILL)
        held = [self.exchange.recv(PREFILL, (run.batch,), TOKEN_DTYPE, self.last)]
        self.clock.token_held()
        for step in range(1, run.output_tokens + 1):
            position = run.prompt_tokens + step - 1
            received = []
            for index, batch in enumerate(self.batches):
                if step > 1:  # micro-batch ``index``'s token of the step before
                    shape = (_size(batch),)
                    received.append(self.exchange.recv(DECODE, shape, TOKEN_DTYPE, self.last))
                    if index == len(self.batches) - 1:
                        held.append(torch.cat(received))
                        self.clock.token_held()
                if step == run.output_tokens:
                    continue  # only collecting the last token
                ids = received[index] if step > 1 else held[0][batch]
                rows = self._embed(DECODE, ids[:, None], position)
                self.exchange.send(DECODE, self._layers(DECODE, rows, position, batch), 1)
            self.exchange.flush(DECODE)
        return Generation(torch.stack(held, dim=1), None)

    def _embed(self, part: Part, ids: Tensor, first: int) -> Tensor:
        with self.clock.phase(part, "compute"):
            return self.setup.model.embed(ids, self.positions(first, ids.shape[1]))

    def _layers(self, part: Part, rows: Tensor, first: int, batch: slice) -> Tensor:
        if self.cache is None:
            raise ValueError("the cache is made by generate")
        with self.clock.phase(part, "compute"):
            for index, layer in enumerate(self.layers):
                rows = cached_layer(layer, rows, first, self.cache, index, batch)
        return rows
