"""tensor_parallel (Megatron style): heads and MLP columns split, two all-reduces per block
(encoder) or per layer (decoder)."""

from __future__ import annotations

from edgetwin.decoder_spec import DecoderSpec, embedding_params, ffn_matrices, layer_params
from edgetwin.model_spec import ModelSpec
from edgetwin.models.costs import (
    BlockStep,
    CostPlan,
    Exchange,
    InputSource,
    embed_flops,
    head_flops,
    weight_bytes,
)
from edgetwin.models.decoder_costs import (
    DecoderPlan,
    DecoderWorkload,
    LayerPass,
    Op,
    Ops,
    allreduce,
    attention_work,
    cached_pass,
    causal_pairs,
    embed_work,
    ffn_work,
    head_work,
    weights,
)
from edgetwin.models.encoder_memory import RankRows, peak_floats
from edgetwin.models.layout import partition_sizes
from edgetwin.models.strategy import VIT_WORKER, Strategy

NAME = "tensor_parallel"


def _cost_plan(
    model: ModelSpec, devices: int, segments: int | None, input_source: InputSource
) -> CostPlan:
    """Every device holds all N rows and its share of the heads and of the MLP's columns
    (``partition_sizes``: 12 heads on 8 devices are 2, 2, 2, 2, 1, 1, 1, 1, as the real
    code splits them); each block all-reduces [N, D] twice."""
    if devices > model.heads:
        raise ValueError(f"{model.heads} heads cannot be split over {devices} devices")
    n, d = model.tokens, model.width
    attention = 2 * (4 * d * d * n + 2 * n * n * d)
    mlp = 2 * (2 * model.mlp_ratio * d * d * n)
    heads, columns = (partition_sizes(total, devices) for total in (model.heads, model.mlp_hidden))
    reduce = Exchange("allreduce", (n,) * devices)
    steps = tuple(
        (
            BlockStep(attention * heads[rank] / model.heads, reduce),
            BlockStep(mlp * columns[rank] / model.mlp_hidden, reduce),
        )
        for rank in range(devices)
    )
    rows = (n,) * devices
    terminal = input_source == "terminal"
    embed = (embed_flops(model),) + ((0.0,) if terminal else (embed_flops(model),)) * (devices - 1)
    embedded = (n,) + (0 if terminal else n,) * (devices - 1)  # the others receive the rows
    held = [
        RankRows(
            n,
            n,
            head_share=heads[rank] / model.heads,
            column_share=columns[rank] / model.mlp_hidden,
            keeps_block_input=False,
            embedded=rows_in,
        )
        for rank, rows_in in enumerate(embedded)
    ]
    return CostPlan(
        NAME,
        rows,
        rows,
        None,
        steps,
        embed,
        rows,
        head_flops(model),
        None,
        weight_bytes(model, devices),
        rows if terminal else None,
        tuple(peak_floats(model, rank_rows) for rank_rows in held),
    )


def rank_layer_params(model: DecoderSpec, rank: int, world: int) -> int:
    """One layer's parameters at ``rank``: 1/P of the Q, K, V and output projections and
    of the Q, K, V biases; its FFN columns (``partition_sizes``) of each FFN matrix and
    column bias; the norms and the output and down biases whole (added after the sum)."""
    d, kv, f = model.width, model.kv_width, model.ffn_size
    heads = 2 * d * d + 2 * d * kv + (d + 2 * kv if model.bias in ("all", "qkv") else 0)
    matrices = ffn_matrices(model)
    per_column = matrices * d + (matrices - 1 if model.bias == "all" else 0)
    other_columns = f - partition_sizes(f, world)[rank]
    return layer_params(model) - heads + heads // world - per_column * other_columns


def _decoder_plan(work: DecoderWorkload) -> DecoderPlan:
    """docs/llm.md's tensor parallel: H/P query heads, H_kv/P KV heads and F/P FFN columns
    per rank; an all-reduce of [B, t, D] after the attention and after the FFN."""
    model, world, batch, prompt = work.model, work.devices, work.batch, work.prompt_tokens
    for field, heads in (("heads", model.heads), ("kv_heads", model.kv_heads)):
        if heads % world:
            raise ValueError(f"{field} {heads} are not divisible by {world} devices")
    share = 1.0 / world

    def layer_ops(tokens: int, context: int | None) -> tuple[Op, ...]:
        rows = batch * tokens
        if context is None:
            pairs = causal_pairs(0, tokens)
            read = tokens
        else:
            pairs = read = context + tokens
        attention = attention_work(model, rows, rows, batch * pairs, batch * read, rows, share)
        reduce = allreduce(model, world, batch, tokens)
        return (attention, reduce, ffn_work(model, rows, share), reduce)

    def phase(tokens: int, context: int | None) -> Ops:
        ops = (embed_work(model, batch * tokens), *layer_ops(tokens, context) * model.layers)
        return ((*ops, head_work(model, batch)),) * world

    def layer_pass(rank: int, context: int | None) -> LayerPass:
        heads, kv_heads = model.heads // world, model.kv_heads // world
        columns = partition_sizes(model.ffn_size, world)[rank]
        return cached_pass(model, batch, prompt, context, heads, kv_heads, columns, partial=1)

    own = [
        model.layers * rank_layer_params(model, rank, world) + embedding_params(model)
        for rank in range(world)
    ]
    return DecoderPlan(
        NAME,
        work,
        tuple(weights(model, params) for params in own),
        (model.layers,) * world,
        (model.kv_width // world,) * world,
        phase(prompt, None),
        lambda step: phase(1, prompt + step),
        lambda rank, tokens: tokens,
        layer_pass,
    )


TENSOR_PARALLEL = Strategy(
    NAME,
    "TP",
    cost_plan=_cost_plan,
    entry_point=VIT_WORKER,
    selectable=True,
    decoder_plan=_decoder_plan,
)
