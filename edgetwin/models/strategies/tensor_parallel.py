"""tensor_parallel (Megatron style): heads and MLP columns split, two all-reduces per block."""

from __future__ import annotations

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
from edgetwin.models.strategy import Strategy

NAME = "tensor_parallel"


def _cost_plan(
    model: ModelSpec, devices: int, segments: int | None, input_source: InputSource
) -> CostPlan:
    """Every device holds all N rows; each block all-reduces [N, D] twice."""
    n, d = model.tokens, model.width
    attention = 2 * (4 * d * d * n + 2 * n * n * d) / devices
    mlp = 2 * (2 * model.mlp_ratio * d * d * n) / devices
    reduce = Exchange("allreduce", (n,) * devices)
    step = (BlockStep(attention, reduce), BlockStep(mlp, reduce))
    rows = (n,) * devices
    terminal = input_source == "terminal"
    embed = (embed_flops(model),) + ((0.0,) if terminal else (embed_flops(model),)) * (devices - 1)
    return CostPlan(
        NAME,
        rows,
        rows,
        None,
        (step,) * devices,
        embed,
        head_flops(model),
        None,
        weight_bytes(model, devices),
        rows if terminal else None,
    )


TENSOR_PARALLEL = Strategy(NAME, "TP", cost_plan=_cost_plan, selectable=True)
