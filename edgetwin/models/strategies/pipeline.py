"""pipeline: contiguous layer ranges, one per device; activations cross each boundary."""

from __future__ import annotations

from collections.abc import Sequence

from edgetwin.decoder_spec import layer_params
from edgetwin.models.decoder_costs import (
    DecoderPlan,
    DecoderWorkload,
    Op,
    Ops,
    attention_work,
    causal_pairs,
    embed_work,
    ffn_work,
    head_work,
    send,
    token_ids,
    weights,
)
from edgetwin.models.layout import partition_sizes
from edgetwin.models.strategy import Strategy

NAME = "pipeline"


def balanced_layers(layers: int, speeds: Sequence[float]) -> tuple[int, ...]:
    """Layers per device in proportion to each device's speed (at least one each), the
    remainder to the largest fractions: a stage's time is then as even as whole layers
    allow."""
    if layers < len(speeds):
        raise ValueError(f"{layers} layers cannot be split over {len(speeds)} devices")
    spare = layers - len(speeds)
    shares = [spare * s / sum(speeds) for s in speeds]
    sizes = [1 + int(share) for share in shares]
    by_fraction = sorted(range(len(speeds)), key=lambda i: (-(shares[i] - int(shares[i])), i))
    for i in by_fraction[: layers - sum(sizes)]:
        sizes[i] += 1
    return tuple(sizes)


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
    table = model.vocab * model.width
    positions = model.max_positions * model.width if model.positions == "learned" else 0
    own = [layer_params(model) * size for size in sizes]
    own[0] += table + positions
    own[last] += table + (2 if model.norm == "layernorm" else 1) * model.width
    return DecoderPlan(
        NAME,
        work,
        tuple(weights(model, params) for params in own),
        tuple(sizes),
        (model.kv_width,) * world,
        tuple(prefill),
        decode,
        lambda rank, tokens: tokens,
        finish,
    )


PIPELINE = Strategy(NAME, "PP", decoder_plan=_decoder_plan, splits_layers=True)
