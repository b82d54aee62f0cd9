"""Decoder cost plans: what a strategy's prefill and decode steps cost, as pure data.

For a decoder, a workload (sequences B, prompt T) and a strategy on P devices, a
``DecoderPlan`` says per phase (the prefill; one decode step at a context) and per
device what it does, in order: pieces of ``Work`` (FLOPs, bytes of memory traffic:
weights read, KV read and written, activations) and ``Transfer``s (a collective or a
point-to-point send, its shape and bytes). docs/llm.md is the contract each strategy
follows; the twin runs the plan, the real code sends the same tensors. FLOPs count a
multiply-add as two.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from edgetwin.decoder_spec import (
    DTYPE_BYTES,
    DecoderSpec,
    attention_params,
    embedding_params,
    ffn_matrices,
    ffn_params,
    layer_params,
    norm_params,
)
from edgetwin.models.layout import Layout
from edgetwin.models.ring_steps import ring_steps

ID_BYTES = 8  # token ids cross the wire as int64
FFN_TENSORS = {"swiglu": 3, "gelu": 2}  # [rows, F] tensors alive at once: silu(gate), up, product
Kind = Literal["allgather", "allreduce", "broadcast", "send"]


@dataclass(frozen=True)
class Work:
    """A piece of work on one device; ``rows``: the rows its kernels span."""

    flops: float
    memory_bytes: float
    rows: int
    label: str = ""

    def __add__(self, other: Work) -> Work:
        label = self.label or other.label
        rows = max(self.rows, other.rows)
        return Work(self.flops + other.flops, self.memory_bytes + other.memory_bytes, rows, label)


@dataclass(frozen=True)
class Transfer:
    """A collective over every rank, or a send from ``peers[0]`` to ``peers[1]``.

    ``shape``: one rank's piece as the real code sends it; ``piece_bytes``: the bytes of
    each rank's piece on the wire (padded; 0 for a rank with none: a broadcast's or a
    send's other ranks).
    """

    kind: Kind
    shape: tuple[int, ...]
    piece_bytes: tuple[float, ...]
    peers: tuple[int, int] | None = None

    @property
    def root(self) -> int:
        """The rank that sends a broadcast or a send."""
        return self.peers[0] if self.peers else self.piece_bytes.index(max(self.piece_bytes))


Op = Work | Transfer
Ops = tuple[tuple[Op, ...], ...]  # [rank][op], in order


@dataclass(frozen=True)
class DecoderWorkload:
    """What a plan is built for: the model, devices, sequences B, prompt T, and a
    strategy's parameters (segments L; layers per device for a layer split)."""

    model: DecoderSpec
    devices: int
    batch: int
    prompt_tokens: int
    segments: int | None = None
    stage_layers: tuple[int, ...] | None = None


@dataclass(frozen=True)
class LayerPass:
    """What one rank holds at once while one layer runs (docs/llm.md's Memory): ``batch``
    sequences of ``rows`` new positions attending over ``keys`` positions, with ``heads``
    query heads, ``kv_heads`` KV heads and ``ffn_columns`` FFN columns. ``before`` and
    ``during``: the [rows, D] hidden tensors alive at the attention and at the FFN (the
    stage's input, the layer's input, the normalised rows...). ``context``: position-wise
    prefill's gathered rows per sequence (0 elsewhere): it then also holds the assembled
    context rows and their keys and values (not cache views). ``masked``: an additive
    mask [rows, keys] exists (a pass of more than one row)."""

    batch: int
    rows: int
    keys: int
    heads: int
    kv_heads: int
    ffn_columns: int
    before: int
    during: int
    context: int = 0

    @property
    def masked(self) -> bool:
        return self.rows > 1


def transient_bytes(model: DecoderSpec, step: LayerPass) -> float:
    """The activations ``step`` holds at its peak, the larger of two moments. At the
    attention: its hidden tensors, the queries and the output ([B, t, h, d_h] each), keys
    and values repeated to the query heads (grouped-query attention; otherwise cache
    views), the mask. At the FFN: its hidden tensors, the attention's output, the mask and
    the FFN's [B, t, F] tensors. A position-wise prefill holds its context at both."""
    d, dh, batch = model.width, model.head_dim, step.batch
    hidden = batch * step.rows * d
    queries = batch * step.rows * step.heads * dh
    grouped = 2 * batch * step.keys * step.heads * dh if step.heads > step.kv_heads else 0
    context = 0
    if step.context:
        context = batch * (step.context + step.keys) * d
        context += 2 * batch * step.keys * step.kv_heads * dh
    mask = step.rows * step.keys if step.masked else 0
    ffn = FFN_TENSORS[model.ffn] * batch * step.rows * step.ffn_columns
    attention = hidden * step.before + 2 * queries + grouped + context + mask
    feed_forward = hidden * step.during + queries + context + mask + ffn
    return act_bytes(model) * max(attention, feed_forward)


@dataclass(frozen=True)
class DecoderPlan:
    """The phases of one generation and what each device holds.

    ``decode(step)``: the ops of decode step ``step`` (0 for the first; its input is the
    token at position T + step). ``finish``: ops after the last decode step (the last
    token ids a pipeline sends back). ``kv_rows(rank, tokens)``: the positions of a
    sequence holding ``tokens`` positions whose keys and values ``rank`` keeps.
    ``kv_layers`` and ``kv_width``: the layers and the KV width (per position) each
    rank keeps them for. ``layer_pass(rank, context)``: what ``rank`` holds at once in a
    layer of the prefill (``context`` None) or of a decode step after ``context``
    positions.
    """

    strategy: str
    workload: DecoderWorkload
    weight_bytes: tuple[float, ...]
    kv_layers: tuple[int, ...]
    kv_width: tuple[int, ...]
    prefill: Ops
    decode: Callable[[int], Ops]
    kv_rows: Callable[[int, int], int]
    layer_pass: Callable[[int, int | None], LayerPass]
    finish: Ops = ()

    @property
    def devices(self) -> int:
        return self.workload.devices

    def kv_bytes(self, rank: int, tokens: int) -> float:
        """KV-cache bytes ``rank`` holds once the sequences hold ``tokens`` positions."""
        model, batch = self.workload.model, self.workload.batch
        rows = self.kv_rows(rank, tokens)
        per_row = 2 * self.kv_layers[rank] * self.kv_width[rank] * DTYPE_BYTES[model.kv_dtype]
        return per_row * rows * batch

    def transient_bytes(self, rank: int, context: int | None = None) -> float:
        """Activation bytes ``rank`` holds at once in the prefill (``context`` None) or in
        the decode step after ``context`` positions."""
        return transient_bytes(self.workload.model, self.layer_pass(rank, context))

    def need_bytes(self, rank: int, kept: int, context: int | None = None) -> float:
        """KV cache and activations ``rank`` holds in the prefill (``context`` None) or in
        the decode step after ``context`` positions of a generation that keeps ``kept``
        positions: the real code allocates the whole cache (``kv_bytes`` at ``kept``)
        before its prefill, so every moment holds all of it (docs/llm.md's Memory)."""
        return self.kv_bytes(rank, kept) + self.transient_bytes(rank, context)

    def peak_bytes(self, rank: int, tokens: int) -> tuple[float, str]:
        """Weights, KV cache and activations ``rank`` holds at its peak over a generation
        whose sequences reach ``tokens`` positions, and the phase it peaks in: ``prefill``,
        or ``decode`` (the last step's: its activations grow with the context; the whole
        cache is held throughout, ``need_bytes``). What the twin's memory check holds
        against the device's RAM."""
        prompt = self.workload.prompt_tokens
        need = {"prefill": self.need_bytes(rank, tokens)}
        if tokens > prompt:
            need["decode"] = self.need_bytes(rank, tokens, tokens - 1)
        phase = max(need, key=need.__getitem__)
        return self.weight_bytes[rank] + need[phase], phase

    def tightest(self, tokens: int, ram_bytes: Sequence[float]) -> tuple[float, float]:
        """The weight and KV-cache bytes of the device whose weights and KV cache take the
        largest share of its own RAM (``ram_bytes``, rank order) once the sequences hold
        ``tokens`` positions (a row's ``weights_mb`` and ``kv_cache_mb``: with one RAM on
        every device, the device that holds the most)."""
        held = [(self.weight_bytes[r], self.kv_bytes(r, tokens)) for r in range(self.devices)]
        return held[tightest_rank([sum(h) for h in held], ram_bytes)]

    def phases(self, output_tokens: int) -> list[Ops]:
        """Prefill, the ``output_tokens - 1`` decode steps, then what follows the last."""
        steps = [self.decode(step) for step in range(output_tokens - 1)]
        return [self.prefill, *steps, *([self.finish] if steps and self.finish else [])]


def tightest_rank(held_bytes: Sequence[float], ram_bytes: Sequence[float | None]) -> int:
    """The rank whose ``held_bytes`` are the largest share of its RAM (the first of equal
    shares, compared exactly); where a rank's RAM is not known (None), the rank that holds
    the most."""
    ranks = range(len(held_bytes))
    known = [ram for ram in ram_bytes if ram is not None]
    if len(known) < len(held_bytes):
        return max(ranks, key=lambda r: held_bytes[r])
    return max(ranks, key=lambda r: Fraction(held_bytes[r]) / Fraction(known[r]))


def kept_decode_rows(rank: int, world: int, generated: int) -> int:
    """Of ``generated`` decode positions, how many position-wise ``rank`` keeps: decode
    step s's keys and values stay at rank s mod P."""
    return generated // world + (1 if rank < generated % world else 0)


def phase_flops(phases: Sequence[Ops], rank: int) -> float:
    """Every FLOP ``rank`` does in ``phases``."""
    return sum(op.flops for ops in phases for op in ops[rank] if isinstance(op, Work))


def contributed_bytes(phases: Sequence[Ops]) -> float:
    """docs/llm.md's ``bytes_sent``: what every rank puts into its sends and collectives
    (its own piece of an all-gather or all-reduce, a send's or a broadcast's tensor at its
    root), summed over ranks and phases. It does not depend on how a collective moves the
    pieces on the wire, so the real code counts the same figure."""
    return sum(
        op.piece_bytes[rank]
        for ops in phases
        for rank, rank_ops in enumerate(ops)
        for op in rank_ops
        if isinstance(op, Transfer)
    )


def messages(phases: Sequence[Ops]) -> int:
    """Messages ``phases`` wait for in turn: each collective's ring steps and each send
    (``ring_steps``), counted once, at its root."""
    return sum(
        ring_steps(op.kind, len(op.piece_bytes))
        for ops in phases
        for rank, rank_ops in enumerate(ops)
        for op in rank_ops
        if isinstance(op, Transfer) and op.root == rank
    )


# ------------------------------------------------------------ pieces of a layer


def act_bytes(model: DecoderSpec) -> float:
    return DTYPE_BYTES[model.activation_dtype]


def weights(model: DecoderSpec, params: float) -> float:
    return params * DTYPE_BYTES[model.weight_dtype]


def attention_work(
    model: DecoderSpec,
    rows: int,
    kv_proj_rows: int,
    pairs: float,
    kv_read_rows: float,
    kv_write_rows: int,
    share: float = 1.0,
) -> Work:
    """Queries and output projection of ``rows`` rows, keys and values of
    ``kv_proj_rows``, attention over ``pairs`` (query, key) pairs, with the KV cache
    read for ``kv_read_rows`` rows and written for ``kv_write_rows``; ``share`` of the
    heads (tensor parallel: 1/P)."""
    d, kv, a = model.width, model.kv_width, act_bytes(model)
    flops = 2 * (2 * rows * d * d + 2 * kv_proj_rows * d * kv) * share + 4 * pairs * d * share
    kv_bytes = 2 * kv * share * DTYPE_BYTES[model.kv_dtype] * (kv_read_rows + kv_write_rows)
    activations = a * (rows * 4 * d * share + kv_proj_rows * (d + 2 * kv * share))
    memory = weights(model, attention_params(model) * share) + kv_bytes + activations
    return Work(flops, memory, rows, "attention")


def ffn_work(model: DecoderSpec, rows: int, share: float = 1.0) -> Work:
    """The FFN on ``rows`` rows, ``share`` of its columns."""
    d, f = model.width, model.ffn_size
    flops = 2 * ffn_matrices(model) * rows * d * f * share
    activations = act_bytes(model) * rows * (2 * d + (ffn_matrices(model) + 1) * f * share)
    return Work(flops, weights(model, ffn_params(model) * share) + activations, rows, "ffn")


def embed_work(model: DecoderSpec, rows: int) -> Work:
    """Token (and learned position) rows looked up: memory only."""
    tables = 2 if model.positions == "learned" else 1
    return Work(0.0, rows * model.width * (tables * weights(model, 1) + act_bytes(model)), rows)


def head_work(model: DecoderSpec, rows: int) -> Work:
    """Final norm and LM head on ``rows`` positions, the argmax over the vocabulary."""
    d, v = model.width, model.vocab
    memory = weights(model, v * d + norm_params(model)) + act_bytes(model) * rows * (d + v)
    return Work(2.0 * rows * d * v, memory, rows, "head")


def causal_pairs(start: int, stop: int) -> float:
    """(query, key) pairs of positions start..stop-1 under the causal mask: each attends
    to itself and every position before it."""
    return (stop * (stop + 1) - start * (start + 1)) / 2


# ------------------------------------------------------------ exchanges


def hidden_bytes(model: DecoderSpec, *shape: int) -> float:
    """Bytes of a hidden-state tensor of ``shape`` (its last axis the width)."""
    count = model.width
    for size in shape:
        count *= size
    return count * act_bytes(model)


def allreduce(model: DecoderSpec, devices: int, batch: int, rows: int) -> Transfer:
    nbytes = hidden_bytes(model, batch, rows)
    return Transfer("allreduce", (batch, rows, model.width), (nbytes,) * devices)


def token_ids(devices: int, root: int, batch: int, kind: Kind, dst: int | None = None) -> Transfer:
    """``batch`` int64 token ids from ``root``: to everyone (broadcast) or to ``dst``."""
    pieces = tuple(float(batch * ID_BYTES) if r == root else 0.0 for r in range(devices))
    return Transfer(kind, (batch,), pieces, None if dst is None else (root, dst))


def send(model: DecoderSpec, devices: int, src: int, dst: int, shape: tuple[int, ...]) -> Transfer:
    """A hidden-state tensor of ``shape`` from ``src`` to ``dst``."""
    nbytes = hidden_bytes(model, *shape[:-1])
    pieces = tuple(nbytes if r == src else 0.0 for r in range(devices))
    return Transfer("send", shape, pieces, (src, dst))


def full_weight_bytes(model: DecoderSpec) -> float:
    return weights(model, model.layers * layer_params(model) + embedding_params(model))


# ------------------------------------------------------------ position-wise (and single)


def decoder_position_wise(strategy: str, work: DecoderWorkload, layout: Layout) -> DecoderPlan:
    """Prompt positions split by ``layout`` (one rank: single); docs/llm.md's voltage and
    prism. Prefill: before each layer an all-gather of every rank's rows (or segment
    means), padded as the layout says; the last rank's head picks the first token and
    broadcasts it. Decode: replicated weights, every rank attends over the KV rows it
    keeps, then an all-gather of the partial results [B, H, d_h + 2]."""
    model, world, batch = work.model, layout.world, work.batch
    prompt = work.prompt_tokens
    gather: Transfer | None = None
    if world > 1:
        pad = layout.padded_rows
        nbytes = hidden_bytes(model, batch, pad)
        gather = Transfer("allgather", (batch, pad, model.width), (nbytes,) * world)
    prefill = tuple(_position_wise_prefill(work, layout, rank, gather) for rank in range(world))

    def kv_rows(rank: int, tokens: int) -> int:
        start, stop = layout.bounds(rank)
        prompt_rows = max(0, min(stop, tokens) - start)
        return prompt_rows + kept_decode_rows(rank, world, max(0, tokens - prompt))

    def decode(step: int) -> Ops:
        context = prompt + step  # positions before the new one
        partial = (batch, model.heads, model.head_dim + 2)
        nbytes = batch * model.heads * (model.head_dim + 2) * act_bytes(model)
        combine = Transfer("allgather", partial, (nbytes,) * world)
        ops = []
        for rank in range(world):
            own = kv_rows(rank, context)
            keeps = 1 if step % world == rank else 0
            pairs = batch * (own + keeps)  # every key it keeps, the new one included
            attend = attention_work(model, batch, batch, pairs, pairs, batch * keeps)
            merge = Work(6.0 * world * batch * model.heads * (model.head_dim + 2), 0.0, batch)
            rank_ops: list[Op] = [embed_work(model, batch)]
            for _ in range(model.layers):
                if world > 1:
                    rank_ops += [attend, combine, merge + ffn_work(model, batch)]
                else:
                    rank_ops.append(attend + ffn_work(model, batch))
            rank_ops.append(head_work(model, batch))
            ops.append(tuple(rank_ops))
        return tuple(ops)

    def layer_pass(rank: int, context: int | None) -> LayerPass:
        if world == 1:  # single: a layer over the cache (greedy_loop, cached_layer)
            return cached_pass(model, batch, prompt, context)
        if context is None:  # its rows, and the context they attend over, gathered
            start, stop = layout.bounds(rank)
            keys = _position_wise_keys(layout, rank)
            gathered = world * layout.padded_rows
            heads = model.heads, model.kv_heads
            return LayerPass(batch, stop - start, keys, *heads, model.ffn_size, 2, 3, gathered)
        kept = kv_rows(rank, context + 1)  # its share of the keys, the new one included
        return LayerPass(batch, 1, kept, model.heads, model.kv_heads, model.ffn_size, 2, 3)

    every = full_weight_bytes(model)
    return DecoderPlan(
        strategy,
        work,
        (every,) * world,
        (model.layers,) * world,
        (model.kv_width,) * world,
        prefill,
        decode,
        kv_rows,
        layer_pass,
    )


def cached_pass(
    model: DecoderSpec,
    batch: int,
    prompt: int,
    context: int | None,
    heads: int | None = None,
    kv_heads: int | None = None,
    ffn_columns: int | None = None,
    partial: int = 0,
) -> LayerPass:
    """A layer over the KV cache (single, pipeline, tensor parallel: a rank's ``heads``,
    ``kv_heads`` and ``ffn_columns``), in the prefill (``context`` None) or a decode step:
    at the attention it holds the stage's input, the layer's and its normalised rows; at
    the FFN also the attention's sum and its normalised rows, and ``partial`` more
    (tensor parallel: the summed output projection)."""
    rows, keys = (prompt, prompt) if context is None else (1, context + 1)
    return LayerPass(
        batch,
        rows,
        keys,
        model.heads if heads is None else heads,
        model.kv_heads if kv_heads is None else kv_heads,
        model.ffn_size if ffn_columns is None else ffn_columns,
        3,
        5 + partial,
    )


def _position_wise_keys(layout: Layout, rank: int) -> int:
    """The positions ``rank``'s prefill attends over: every one up to its last (voltage),
    or the earlier ranks' segment means and its own rows (prism)."""
    start, stop = layout.bounds(rank)
    if layout.segment_rows is None:
        return layout.tokens
    return stop - start + sum(layout.sent_rows(q) for q in range(rank))


def _position_wise_prefill(
    work: DecoderWorkload, layout: Layout, rank: int, gather: Transfer | None
) -> tuple[Op, ...]:
    """One rank's prefill: its rows' queries; keys and values of every row (full rows) or
    of its rows and the earlier ranks' segment means, causally."""
    model, batch = work.model, work.batch
    start, stop = layout.bounds(rank)
    own = stop - start
    kv_proj = _position_wise_keys(layout, rank)
    if layout.segment_rows is None:
        pairs, means = causal_pairs(start, stop), 0.0
    else:
        pairs = causal_pairs(0, own) + own * (kv_proj - own)
        means = float((own - layout.sent_rows(rank)) * model.width)
    rows = batch * own
    attention = attention_work(model, rows, batch * kv_proj, batch * pairs, batch * kv_proj, rows)
    block = attention + ffn_work(model, rows) + Work(batch * means, 0.0, rows)
    ops: list[Op] = [embed_work(model, rows)]
    for _ in range(model.layers):
        ops += [gather, block] if gather is not None else [block]
    last = layout.world - 1
    if rank == last:
        ops.append(head_work(model, batch))
    if gather is not None:
        ops.append(token_ids(layout.world, last, batch, "broadcast"))
    return tuple(ops)
