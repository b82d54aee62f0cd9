"""One rank's forward for single, voltage and prism.

Each block, a rank normalises its own rows (the attention input), sends its
contribution (voltage: those rows; prism: the means of its segments), and
computes queries from its own rows and keys/values over the context. Prism
adds log(segment size) to the logits of each received mean, which equals
repeating the mean that many times. The terminal (rank 0) holds the CLS token
and returns the logits; the other ranks return ``None``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

from edgetwin.emu.vit.exchange import GlooExchange
from edgetwin.emu.vit.model import EncoderBlock, ViT
from edgetwin.emu.vit.phases import PhaseClock
from edgetwin.models.layout import Layout

InputSource = Literal["terminal", "replicated"]


def segment_means(rows: Tensor, sizes: Sequence[int]) -> Tensor:
    """Column means of consecutive segments of ``rows`` [B, n, D] -> [B, len(sizes), D].

    ``sizes`` as ``partition_sizes`` makes them: the longer segments (one row more) first.
    """
    batch, count, width = rows.shape
    long, short = sizes[0], sizes[-1]
    n_long = sum(size == long for size in sizes)
    if sum(sizes) != count or long - short > 1 or list(sizes) != sorted(sizes, reverse=True):
        raise ValueError(f"segment sizes {list(sizes)} do not split {count} rows evenly")
    split = n_long * long
    means = [rows[:, :split].reshape(batch, n_long, long, width).mean(dim=2)]
    if split < count:
        tail = rows[:, split:].reshape(batch, len(sizes) - n_long, short, width)
        means.append(tail.mean(dim=2))
    return torch.cat(means, dim=1) if len(means) > 1 else means[0]


class RankForward:
    """The part of a forward that ``rank`` does for a layout and batch size."""

    def __init__(
        self,
        model: ViT,
        layout: Layout,
        rank: int,
        batch: int,
        clock: PhaseClock,
        input_source: InputSource = "terminal",
    ) -> None:
        self.model = model
        self.layout = layout
        self.rank = rank
        self.batch = batch
        self.clock = clock
        self.input_source = input_source
        self.device = model.pos_embed.device
        self.exchange = GlooExchange(layout, rank, clock) if layout.world > 1 else None
        counts = layout.context_log_counts(rank)
        self.log_counts = None if counts is None else torch.tensor(counts, device=self.device)
        segments = layout.segment_rows
        self.segment_rows = None if segments is None else segments[rank]

    @property
    def bytes_sent(self) -> int:
        """Bytes this rank put into sends and collectives during the last forward."""
        return 0 if self.exchange is None else self.exchange.bytes_sent

    def __call__(self, images: Tensor | None) -> Tensor | None:
        """``images`` on the device where this rank embeds (terminal, or every rank if
        replicated); ``None`` elsewhere."""
        if self.exchange is not None:
            self.exchange.bytes_sent = 0
        rows = self._embed(images)
        for index, block in enumerate(self.model.encoder_blocks()):
            rows = self._block(f"block{index}", block, rows)
        if self.rank != 0:
            return None
        with self.clock.phase("head", "compute"):
            return self.model.classify(rows[:, 0])

    def _embed(self, images: Tensor | None) -> Tensor:
        start, stop = self.layout.bounds(self.rank)
        if self.exchange is None or self.input_source == "replicated":
            if images is None:
                raise ValueError(f"rank {self.rank} embeds its rows and needs the images")
            with self.clock.phase("embed", "compute"):
                return self.model.embed_rows(images, start, stop)
        if self.rank != 0:
            width = self.model.spec.width
            return self.exchange.receive_partition("embed", self.batch, width, self.device)
        if images is None:
            raise ValueError("the terminal (rank 0) embeds the input and needs the images")
        with self.clock.phase("embed", "compute"):
            everything = self.model.embed_rows(images, 0, self.layout.tokens)
        return self.exchange.scatter("embed", everything)

    def _block(self, step: str, block: EncoderBlock, rows: Tensor) -> Tensor:
        with self.clock.phase(step, "compute"):
            own_input = block.attention_input(rows)
            if self.segment_rows is None:
                payload = own_input
            else:
                payload = segment_means(own_input, self.segment_rows)
        if self.exchange is None:
            context = own_input
        else:
            context = self.exchange.gather_context(step, payload, own_input)
        with self.clock.phase(step, "compute"):
            return block.finish(rows, own_input, context, self.log_counts)
