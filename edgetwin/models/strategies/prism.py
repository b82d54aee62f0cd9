"""prism (Segment Means): each device sends the means of L segments of its partition."""

from __future__ import annotations

from edgetwin.model_spec import ModelSpec
from edgetwin.models.costs import CostPlan, InputSource, position_wise_plan
from edgetwin.models.decoder_costs import DecoderPlan, DecoderWorkload, decoder_position_wise
from edgetwin.models.layout import Layout, segment_means
from edgetwin.models.strategy import VIT_WORKER, Strategy

NAME = "prism"


def _layout(tokens: int, world: int, segments: int | None) -> Layout:
    if segments is None:
        raise ValueError(f"{NAME} needs segments L >= 1")
    return segment_means(tokens, world, segments)


def _cost_plan(
    model: ModelSpec, devices: int, segments: int | None, input_source: InputSource
) -> CostPlan:
    layout = _layout(model.tokens, devices, segments)
    return position_wise_plan(NAME, model, layout, segments, input_source)


def _decoder_plan(work: DecoderWorkload) -> DecoderPlan:
    layout = _layout(work.prompt_tokens, work.devices, work.segments)
    return decoder_position_wise(NAME, work, layout)


PRISM = Strategy(
    NAME,
    "P",
    params=("cr", "segments"),
    cost_plan=_cost_plan,
    layout=_layout,
    entry_point=VIT_WORKER,
    selectable=True,
    decoder_plan=_decoder_plan,
)
