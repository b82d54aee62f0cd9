"""The real code of each encoder strategy: what one rank runs for a strategy's name
(position-wise strategies by their partition layout, tensor_parallel by its shards)."""

from __future__ import annotations

from edgetwin.emu.vit.forward import InputSource, RankForward
from edgetwin.emu.vit.model import ViT
from edgetwin.emu.vit.phases import PhaseClock
from edgetwin.emu.vit.tensor_parallel import TensorParallelForward
from edgetwin.model_spec import ModelSpec
from edgetwin.models import registry
from edgetwin.models.strategies import tensor_parallel

Forward = RankForward | TensorParallelForward


def check_split(strategy: str, spec: ModelSpec, world: int, segments: int | None) -> None:
    """A ValueError if ``strategy`` cannot split ``spec`` over ``world`` ranks: its layout
    says so, or, for tensor parallel, its cost plan (a head for each rank)."""
    if strategy != tensor_parallel.NAME:
        registry.layout(strategy, spec.tokens, world, segments)
    elif segments is not None:
        raise ValueError(f"{strategy} takes no segments")
    elif world < 2:
        raise ValueError(f"{strategy} cannot run on {world} rank(s)")
    else:
        registry.cost_plan(spec, strategy, world)


def rank_forward(
    strategy: str,
    model: ViT,
    rank: int,
    world: int,
    segments: int | None,
    batch: int,
    clock: PhaseClock,
    input_source: InputSource,
) -> Forward:
    """What ``rank`` of ``world`` runs of one forward of ``batch`` samples."""
    if strategy == tensor_parallel.NAME:
        return TensorParallelForward(model, rank, world, batch, clock, input_source)
    layout = registry.layout(strategy, model.spec.tokens, world, segments)
    return RankForward(model, layout, rank, batch, clock, input_source)
