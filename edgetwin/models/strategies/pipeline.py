"""pipeline: contiguous layer ranges, one per device; activations cross each boundary."""

from __future__ import annotations

import math
from collections.abc import Sequence

from edgetwin.decoder_spec import (
    DecoderSpec,
    kept_positions,
    kv_bytes_per_token,
    layer_params,
    norm_params,
)
from edgetwin.models.decoder_costs import (
    DecoderPlan,
    DecoderWorkload,
    LayerPass,
    Op,
    Ops,
    Work,
    attention_work,
    cached_pass,
    causal_pairs,
    embed_work,
    ffn_work,
    head_work,
    send,
    token_ids,
    transient_bytes,
    weights,
)
from edgetwin.models.layout import partition_sizes
from edgetwin.models.strategy import Strategy
from edgetwin.profile import DeviceProfile

NAME = "pipeline"


def balanced_layers(
    layers: int,
    layer_ms: Sequence[float],
    fixed_ms: Sequence[float] | None = None,
    most: Sequence[int] | None = None,
) -> tuple[int, ...]:
    """Layers per device that make the slowest stage as fast as whole layers allow.

    ``layer_ms``: one layer's time on each device; ``fixed_ms``: what each stage does
    besides its layers (rank 0 the embedding, the last rank the LM head); ``most``: the
    most layers each device holds (``layers_that_fit``). Every device takes one layer,
    then each further layer goes to the stage that stays fastest with it (ties: the
    earlier one) among those with room, which minimises the largest stage time of the
    splits that fit.
    """
    world = len(layer_ms)
    if layers < world:
        raise ValueError(f"{layers} layers cannot be split over {world} devices")
    room = list(most) if most is not None else [layers] * world
    if min(room) < 1 or sum(room) < layers:
        raise ValueError(f"{layers} layers do not fit devices holding at most {room}")
    fixed = list(fixed_ms) if fixed_ms is not None else [0.0] * world
    sizes = [1] * world
    for _ in range(layers - world):
        after = [
            fixed[i] + (sizes[i] + 1) * layer_ms[i] if sizes[i] < room[i] else math.inf
            for i in range(world)
        ]
        sizes[after.index(min(after))] += 1
    return tuple(sizes)


def device_layers(
    model: DecoderSpec,
    profiles: Sequence[DeviceProfile],
    free_bytes: Sequence[float],
    batch: int,
    prompt_tokens: int,
    output_tokens: int,
) -> tuple[int, ...]:
    """Layers per device (``profiles`` in rank order, ``free_bytes`` their free RAM) balanced
    on their times for a decode step at the prompt's context: one layer each, and the
    embedding on the first, the LM head on the last, each device holding no more layers
    than its RAM takes with their peak KV cache and a layer's activations (where no split
    holds the peak, the longest context one holds: the run then stops where it must).
    The twin plans with it and the real runs run it."""
    context = prompt_tokens
    layer = attention_work(
        model, batch, batch, batch * (context + 1), batch * context, batch
    ) + ffn_work(model, batch)

    def ms(profile: DeviceProfile, work: Work) -> float:
        return profile.work_ms(work.flops, work.memory_bytes, work.rows)

    layer_ms = [ms(p, layer) for p in profiles]
    fixed_ms = [0.0] * len(profiles)
    fixed_ms[0] += ms(profiles[0], embed_work(model, batch))
    fixed_ms[-1] += ms(profiles[-1], head_work(model, batch))
    kept = kept_positions(prompt_tokens, output_tokens)
    most = layers_that_fit(model, free_bytes, batch, prompt_tokens, kept)
    return balanced_layers(model.layers, layer_ms, fixed_ms, most)


def layers_that_fit(
    model: DecoderSpec, free_bytes: Sequence[float], batch: int, prompt: int, positions: int
) -> tuple[int, ...] | None:
    """The most layers each stage holds in its ``free_bytes`` (what it holds besides its
    layers and one layer's activations at their peak, then per layer its weights and KV
    cache) with ``batch`` sequences of a ``prompt``-token prompt and ``positions``
    positions, or of the most positions below that some split holds
    (``positions_held``); None where the weights alone fit no split."""
    held = positions_held(model, free_bytes, batch, prompt, positions)
    return None if held is None else _room(model, free_bytes, batch, prompt, held)


def positions_held(
    model: DecoderSpec, free_bytes: Sequence[float], batch: int, prompt: int, positions: int
) -> int | None:
    """The most positions, up to ``positions``, whose weights, KV cache and activations
    some layer split holds in ``free_bytes`` (``layers_that_fit``); None where the
    weights alone fit no split."""

    def holds(kept: int) -> bool:
        room = _room(model, free_bytes, batch, prompt, kept)
        return min(room) >= 1 and sum(room) >= model.layers

    if not holds(0):
        return None
    low, high = 0, positions  # the room shrinks as the positions grow: bisect
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if holds(middle) else (low, middle - 1)
    return low


def _room(
    model: DecoderSpec, free_bytes: Sequence[float], batch: int, prompt: int, kept: int
) -> tuple[int, ...]:
    """The most layers each stage holds with ``kept`` positions (``layers_that_fit``)."""
    per_layer = weights(model, layer_params(model))
    per_layer += kv_bytes_per_token(model, 1) * kept * batch
    tokens = min(prompt, kept)
    world = len(free_bytes)
    steps = [_stage_pass(model, batch, tokens, None, world)]
    if kept > tokens:
        steps.append(_stage_pass(model, batch, tokens, kept - 1, world))
    held = max(transient_bytes(model, step) for step in steps) if kept else 0.0
    extra = _extra_params(model, world)
    return tuple(
        max(0, math.floor((free - held - weights(model, params)) / per_layer))
        for free, params in zip(free_bytes, extra, strict=True)
    )


def _stage_pass(
    model: DecoderSpec, batch: int, prompt: int, context: int | None, world: int
) -> LayerPass:
    """A stage's layer: the whole batch in the prefill, a micro-batch in a decode step."""
    rows = batch if context is None else max(partition_sizes(batch, min(batch, world)))
    return cached_pass(model, rows, prompt, context)


def _extra_params(model: DecoderSpec, world: int) -> list[int]:
    """Parameters each stage holds besides its layers: the first the embedding (and a
    learned position table), the last the final norm and the LM head (tied: a copy)."""
    table = model.vocab * model.width
    positions = model.max_positions * model.width if model.positions == "learned" else 0
    extra = [0] * world
    extra[0] += table + positions
    extra[-1] += table + norm_params(model)
    return extra


def _decoder_plan(work: DecoderWorkload) -> DecoderPlan:
    """docs/llm.md's pipeline: the hidden states go stage to stage, the last stage's token
    ids back to rank 0; in decode m = min(B, P) micro-batches are in flight."""
    model, world, batch, prompt = work.model, work.devices, work.batch, work.prompt_tokens
    if world > model.layers:
        raise ValueError(f"{model.layers} layers cannot be split over {world} devices")
    sizes = work.stage_layers or partition_sizes(model.layers, world)
    if len(sizes) != world or sum(sizes) != model.layers:
        raise ValueError(
            f"its layers {list(sizes)} are not {world} sizes adding up to {model.layers}"
        )
    last = world - 1

    def stage(rank: int, rows: int, tokens: int, context: int | None) -> list[Op]:
        """Rank ``rank``'s layers on ``rows`` rows of ``tokens`` new positions each."""
        pairs = causal_pairs(0, tokens) if context is None else tokens * (context + 1)
        read = tokens if context is None else context + tokens
        seqs = rows // tokens
        block = attention_work(model, rows, rows, seqs * pairs, seqs * read, rows)
        return [block + ffn_work(model, rows)] * sizes[rank]

    def forward(rank: int, batch_rows: int, tokens: int, context: int | None) -> list[Op]:
        """Receive from the stage before (rank 0: embed), run the layers, send on."""
        rows = batch_rows * tokens
        shape = (batch_rows, tokens, model.width)
        ops: list[Op] = [embed_work(model, rows)] if rank == 0 else []
        if rank > 0:
            ops.append(send(model, world, rank - 1, rank, shape))
        ops += stage(rank, rows, tokens, context)
        if rank < last:
            ops.append(send(model, world, rank, rank + 1, shape))
        else:
            ops += [head_work(model, batch_rows), token_ids(world, last, batch_rows, "send", 0)]
        return ops

    prefill: list[tuple[Op, ...]] = []
    for rank in range(world):
        ops = forward(rank, batch, prompt, None)
        if rank == 0:
            ops.append(token_ids(world, last, batch, "send", 0))
        prefill.append(tuple(ops))
    micro = partition_sizes(batch, min(batch, world))

    def decode(step: int) -> Ops:
        ops: list[tuple[Op, ...]] = []
        for rank in range(world):
            rank_ops: list[Op] = []
            for size in micro:
                if rank == 0 and step > 0:  # the ids of this micro-batch's previous token
                    rank_ops.append(token_ids(world, last, size, "send", 0))
                rank_ops += forward(rank, size, 1, prompt + step)
            ops.append(tuple(rank_ops))
        return tuple(ops)

    ids_back = tuple(token_ids(world, last, size, "send", 0) for size in micro)
    finish: Ops = (ids_back, *(((),) * last))
    extra = _extra_params(model, world)
    own = [layer_params(model) * size + extra[rank] for rank, size in enumerate(sizes)]
    return DecoderPlan(
        NAME,
        work,
        tuple(weights(model, params) for params in own),
        tuple(sizes),
        (model.kv_width,) * world,
        tuple(prefill),
        decode,
        lambda rank, tokens: tokens,
        lambda rank, context: _stage_pass(model, batch, prompt, context, world),
        finish,
    )


PIPELINE = Strategy(NAME, "PP", decoder_plan=_decoder_plan, splits_layers=True, selectable=True)
