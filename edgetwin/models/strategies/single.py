"""single: one device runs the whole model (the lower-bound baseline)."""

from __future__ import annotations

from edgetwin.model_spec import ModelSpec
from edgetwin.models.costs import CostPlan, InputSource, position_wise_plan
from edgetwin.models.decoder_costs import DecoderPlan, DecoderWorkload, decoder_position_wise
from edgetwin.models.layout import Layout, full_rows
from edgetwin.models.strategy import VIT_WORKER, Strategy

NAME = "single"


def _layout(tokens: int, world: int, segments: int | None) -> Layout:
    return full_rows(tokens, world)


def _cost_plan(
    model: ModelSpec, devices: int, segments: int | None, input_source: InputSource
) -> CostPlan:
    return position_wise_plan(NAME, model, full_rows(model.tokens, 1), None, input_source)


def _decoder_plan(work: DecoderWorkload) -> DecoderPlan:
    return decoder_position_wise(NAME, work, full_rows(work.prompt_tokens, 1))


SINGLE = Strategy(
    NAME,
    "S",
    one_device=True,
    cost_plan=_cost_plan,
    layout=_layout,
    entry_point=VIT_WORKER,
    selectable=True,
    decoder_plan=_decoder_plan,
)
