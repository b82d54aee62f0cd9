"""What an encoder forward holds in memory at its peak, per sample, beyond the weights.

Counted from the tensors the real code (``emu/vit``: ``model.py``, ``forward.py``,
``exchange.py``, ``tensor_parallel.py``) keeps alive, inference mode, where a tensor is
freed when its last reference goes; the twin's RAM check holds these against a device's
``ram_mb``. Measured with the allocator's log on the real code (docs/twin.md's RAM): the
count is exact to the byte for single, voltage, prism and tensor parallel ranks. CPU
attention (flash kernel) never builds the [N, N] scores, so no term grows with the
square of the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgetwin.model_spec import ModelSpec


@dataclass(frozen=True)
class RankRows:
    """The token rows one rank's blocks work on, per sample.

    ``own``: rows it computes queries and the MLP for; ``context``: rows its keys and
    values cover; ``gathered``: whether the context is a tensor of its own (received from
    other ranks) rather than its own normalised rows; ``head_share`` and
    ``column_share``: its share of the heads and of the MLP's columns (tensor parallel:
    its heads and columns of ``partition_sizes``); ``keeps_block_input``: whether the
    block's input and normalised rows stay held through the MLP (a position-wise block
    passes them to ``EncoderBlock.finish``; tensor parallel's lets them go after the
    attention); ``extra``: rows held beside the block's (prism's segment means; the
    terminal's whole embedded sequence, of which its rows are a view, through block 0);
    ``embedded``: rows it embeds from the input (0: it receives them); ``buffers``: rows
    of exchange buffers kept for the whole run.
    """

    own: int
    context: int
    gathered: bool = False
    head_share: float = 1.0
    column_share: float = 1.0
    keeps_block_input: bool = True
    extra: int = 0
    embedded: int = 0
    buffers: int = 0


def block_peak_rows(rows: RankRows, mlp_ratio: float) -> float:
    """Rows (of the model's width) one encoder block holds at its peak, the larger of two
    moments. At the attention's projection: the block's input, its normalised rows, the
    queries, the attention's output and its projection (own rows each; queries and output
    for the rank's share of heads), keys and values over the context. At the MLP's
    activation: the input and the normalised rows where the block keeps them
    (``keeps_block_input``), the residual sum and its normalised rows, fc1's and GELU's
    outputs (``mlp_ratio`` rows each, the rank's share of columns). A gathered context is
    held at both."""
    own, share = rows.own, rows.head_share
    context = rows.context if rows.gathered else 0
    attention = context + 2 * share * rows.context + (3 + 2 * share) * own
    block_input = 2 if rows.keeps_block_input else 0
    mlp = context + (block_input + 2 + 2 * rows.column_share * mlp_ratio) * own
    return max(attention, mlp)


def input_floats(model: ModelSpec) -> int:
    """Elements of one input image (channels x patches x patch area); 0 for a model
    without a patch embedding (its token ids are not counted)."""
    return model.channels * model.patch_size**2 * (model.tokens - 1)


def peak_floats(model: ModelSpec, rows: RankRows) -> float:
    """Elements per sample one rank holds at its forward's peak: its exchange buffers,
    the input images where it embeds them, and the larger of the embedding (the patches
    reordered, a copy of the image, and two tensors of the embedded rows) and a block
    with the rows held beside it."""
    width = model.width
    image = input_floats(model) if rows.embedded else 0
    embedding = image + 2 * rows.embedded * width
    block = (block_peak_rows(rows, model.mlp_ratio) + rows.extra) * width
    return rows.buffers * width + image + max(embedding, block)
