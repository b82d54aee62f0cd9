"""What a strategy is: one definition the scenario schema, the twin, the real code,
the adaptive policy, plans and reports all read (``edgetwin.models.registry``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from edgetwin.model_spec import ModelSpec
from edgetwin.models.costs import CostPlan, InputSource
from edgetwin.models.crowd.table import Mode
from edgetwin.models.decoder_costs import DecoderPlan, DecoderWorkload
from edgetwin.models.layout import Layout

Param = Literal["cr", "segments"]

# (model, devices, segments L or None, input source) -> the plan the twin runs
CostPlanFn = Callable[["ModelSpec", int, "int | None", InputSource], CostPlan]
# (tokens, ranks, segments L or None) -> which rows each rank holds and sends
LayoutFn = Callable[[int, int, "int | None"], Layout]
# a decoder workload -> the prefill and decode steps the twin runs (docs/llm.md)
DecoderPlanFn = Callable[["DecoderWorkload"], "DecoderPlan"]

VIT_WORKER = "edgetwin.emu.vit.worker"  # real code of the encoder strategies
CROWDIO_FOREMAN = "edgetwin.emu.crowdio.foreman"  # real code of the crowd pipelines


@dataclass(frozen=True)
class Strategy:
    """One strategy, by name.

    ``params``: the scenario parameters it takes; a strategy with any takes exactly one
    of them per configuration (prism: ``cr`` or ``segments``). ``one_device``: it runs on
    one device whatever the sweep says. ``cost_plan``: what the twin runs (``None``: the
    crowd twin runs it as a pipeline, ``pipeline`` its dependency rule). ``layout``: the
    rows each rank holds and sends, for position-wise strategies. ``entry_point``: the
    module of its real code (a dotted path: the registry imports no torch). ``selectable``:
    the adaptive policy may pick it. ``abbrev``: its letters in short labels.
    ``decoder_plan``: what the twin runs for a decoder LLM (``None``: it runs encoders
    only). ``splits_layers``: it cuts the model into contiguous layer ranges, whose sizes
    a scenario may give (``layers``).
    """

    name: str
    abbrev: str
    params: tuple[Param, ...] = ()
    one_device: bool = False
    cost_plan: CostPlanFn | None = None
    layout: LayoutFn | None = None
    entry_point: str | None = None
    selectable: bool = False
    pipeline: Mode | None = None
    decoder_plan: DecoderPlanFn | None = None
    splits_layers: bool = False
