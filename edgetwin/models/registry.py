"""The strategy registry: name -> definition, and what everything asks of a strategy.

Adding a strategy is one module (its ``Strategy``, see ``models/strategies/``) and
one entry in ``BUILTIN`` (docs/strategies.md). ``registered`` adds one for a while
(tests, plug-ins).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

from edgetwin.errors import shown
from edgetwin.model_spec import ModelSpec
from edgetwin.models.costs import CostPlan, InputSource
from edgetwin.models.crowd.table import Mode
from edgetwin.models.decoder_costs import DecoderPlan, DecoderWorkload
from edgetwin.models.layout import Layout
from edgetwin.models.strategies import crowdio, prism, single, tensor_parallel, voltage
from edgetwin.models.strategies.pipeline import PIPELINE
from edgetwin.models.strategy import Strategy

BUILTIN = (
    single.SINGLE,
    voltage.VOLTAGE,
    prism.PRISM,
    tensor_parallel.TENSOR_PARALLEL,
    PIPELINE,
    crowdio.STREAMING,
    crowdio.BARRIER,
)
_REGISTRY: dict[str, Strategy] = {s.name: s for s in BUILTIN}


def names() -> tuple[str, ...]:
    """Every registered strategy, in registration order."""
    return tuple(_REGISTRY)


def strategies() -> tuple[Strategy, ...]:
    return tuple(_REGISTRY.values())


def strategy(name: str) -> Strategy:
    """The definition of ``name``; ``ValueError`` naming the known ones if there is none."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown strategy {shown(name)}; known: {', '.join(_REGISTRY)}") from None


def baseline() -> Strategy:
    """The one-device strategy every distributed one is compared with."""
    return next(s for s in _REGISTRY.values() if s.one_device)


@contextmanager
def registered(definition: Strategy) -> Iterator[Strategy]:
    """``definition`` is registered inside the ``with`` block."""
    if definition.name in _REGISTRY:
        raise ValueError(f"strategy {definition.name!r} is already registered")
    _REGISTRY[definition.name] = definition
    try:
        yield definition
    finally:
        del _REGISTRY[definition.name]


def pipeline(name: str) -> Mode:
    """The dependency rule (streaming or barrier) of crowd strategy ``name``."""
    mode = strategy(name).pipeline
    if mode is None:
        raise ValueError(f"{name} is not a crowd pipeline")
    return mode


def pipeline_strategy(mode: str) -> Strategy:
    """The crowd strategy whose dependency rule is ``mode`` (streaming or barrier)."""
    return next(s for s in _REGISTRY.values() if s.pipeline == mode)


def cost_plan(
    model: ModelSpec,
    name: str,
    devices: int,
    segments: int | None = None,
    input_source: InputSource = "terminal",
) -> CostPlan:
    """The cost plan the twin runs for ``name`` on ``devices`` devices."""
    definition = strategy(name)
    if definition.cost_plan is None:
        runs = "the crowd twin runs it" if definition.pipeline else "it runs decoders only"
        raise ValueError(f"{name} has no cost plan ({runs})")
    if not definition.one_device and devices < 2:
        raise ValueError(f"{name} needs at least 2 devices")
    return definition.cost_plan(model, devices, segments, input_source)


def decoder_plan(name: str, workload: DecoderWorkload) -> DecoderPlan:
    """The prefill and decode steps the twin runs for ``name`` on a decoder workload."""
    definition = strategy(name)
    if definition.decoder_plan is None:
        raise ValueError(f"{name} has no decoder plan; decoders run {decoder_names()}")
    if not definition.one_device and workload.devices < 2:
        raise ValueError(f"{name} needs at least 2 devices")
    return definition.decoder_plan(workload)


def decoder_names() -> tuple[str, ...]:
    """The strategies that run a decoder LLM."""
    return tuple(s.name for s in _REGISTRY.values() if s.decoder_plan is not None)


def encoder_names() -> tuple[str, ...]:
    """The strategies the twin runs for an encoder (those with a cost plan)."""
    return tuple(s.name for s in _REGISTRY.values() if s.cost_plan is not None)


def layout(name: str, tokens: int, world: int, segments: int | None = None) -> Layout:
    """Which rows each of ``world`` ranks holds and sends for ``name``."""
    definition = strategy(name)
    if definition.layout is None:
        raise ValueError(f"{name} is not position-wise: it has no partition layout")
    if definition.one_device != (world == 1):
        raise ValueError(f"{name} cannot run on {world} rank(s)")
    if bool(definition.params) != (segments is not None):
        raise ValueError(f"{name} {'needs' if definition.params else 'takes no'} segments")
    return definition.layout(tokens, world, segments)


class CandidateKey(NamedTuple):
    """A deployment a plan, a policy or a report tells apart: strategy, devices, CR or L."""

    strategy: str
    devices: int | None = None
    cr: float | None = None
    segments: int | None = None

    @property
    def label(self) -> str:
        return candidate_label(*self)

    @property
    def short_label(self) -> str:
        return candidate_label(*self, short=True)

    @property
    def order(self) -> tuple[int, int, float, int]:
        """Its place among candidates: registry order, then devices, CR and L, increasing
        (None first)."""
        where = names().index(self.strategy) if self.strategy in _REGISTRY else len(_REGISTRY)
        return (where, self.devices or 0, self.cr or 0.0, self.segments or 0)


def candidate_label(
    name: str,
    devices: int | None = None,
    cr: float | None = None,
    segments: int | None = None,
    *,
    short: bool = False,
) -> str:
    """A candidate's one label: ``single``, ``voltage x2``, ``prism cr 9.9 x2``,
    ``prism L10 x4`` (CR before segments; no devices: no ``xP``). ``short``: the same
    in the definition's letters, for figure cells: ``S``, ``V2``, ``P9.9x2``, ``TP4``."""
    definition = strategy(name)
    if short:
        if definition.one_device:
            return definition.abbrev
        param = f"{cr:g}x" if cr is not None else (f"L{segments}x" if segments else "")
        return f"{definition.abbrev}{param}{'' if devices is None else devices}"
    if definition.one_device:
        return name
    param = f" cr {cr:g}" if cr is not None else (f" L{segments}" if segments else "")
    return f"{name}{param}{'' if devices is None else f' x{devices}'}"
