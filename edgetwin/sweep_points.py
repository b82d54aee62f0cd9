"""The points of a scenario's sweeps: each a ``Configuration``, what one results row
describes (its labels and columns: ``configuration``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict

from edgetwin.decoder_spec import DecoderSpec
from edgetwin.models import registry
from edgetwin.models.layout import resolved_segments
from edgetwin.scenario import Scenario
from edgetwin.strategy_spec import StrategySpec
from edgetwin.sweep_spec import SweepSpec


class Configuration(BaseModel):
    """One point of the sweep: what a single results row describes."""

    model_config = ConfigDict(frozen=True)

    strategy: str
    devices: int
    batch: int
    bandwidth_mbps: float
    cr: float | None = None
    segments: int | None = None
    prompt_tokens: int | None = None  # decoders
    output_tokens: int | None = None


def swept_bandwidths(scenario: Scenario) -> list[float]:
    """The bandwidths the sweeps name, in file order, each once (none: empty)."""
    return list(dict.fromkeys(bw for sweep in scenario.sweeps for bw in sweep.bandwidth_mbps))


def configurations(scenario: Scenario) -> list[Configuration]:
    """Expand strategies x sweeps into unique configurations, in file order. Two values of
    L or CR asked for that run with the same L (a CR resolves to the nearest whole L, and L
    is at most a partition's rows) are one configuration, the first asked: each ran and
    wrote the same row twice."""
    seen: dict[Configuration, Configuration] = {}
    for sweep in scenario.sweeps:
        bandwidths = sweep.bandwidth_mbps or (scenario.network.bandwidth_mbps,)
        for strategy in scenario.strategies:
            for batch, bw, devices in itertools.product(sweep.batch, bandwidths, sweep.devices):
                for params in _strategy_params(strategy):
                    n_devices = 1 if registry.strategy(strategy.name).one_device else devices
                    for workload in _workloads(scenario, sweep):
                        config = Configuration(
                            strategy=strategy.name,
                            devices=n_devices,
                            batch=batch,
                            bandwidth_mbps=bw,
                            **params,
                            **workload,
                        )
                        seen.setdefault(_what_runs(scenario, config), config)
    return list(seen.values())


def _what_runs(scenario: Scenario, config: Configuration) -> Configuration:
    """A configuration with the segments L it runs with in place of the L or CR asked for."""
    if config.segments is None and config.cr is None:
        return config
    tokens = split_tokens(scenario, config)
    segments = resolved_segments(tokens, config.devices, config.segments, config.cr)
    return config.model_copy(update={"segments": segments, "cr": None})


def split_tokens(scenario: Scenario, config: Configuration) -> int:
    """The positions a configuration splits over its devices: an encoder's tokens, a
    decoder's prompt."""
    model = scenario.model
    tokens = config.prompt_tokens if isinstance(model, DecoderSpec) else model.tokens
    assert tokens is not None
    return tokens


def _workloads(scenario: Scenario, sweep: SweepSpec) -> Iterator[dict[str, int]]:
    """A decoder's prompt x output lengths in this sweep; one empty one for an encoder."""
    if not isinstance(scenario.model, DecoderSpec):
        yield {}
        return
    workload = scenario.decoder_workload
    prompts = sweep.prompt_tokens or (workload.prompt_tokens,)
    outputs = sweep.output_tokens or (workload.output_tokens,)
    for prompt, output in itertools.product(prompts, outputs):
        yield {"prompt_tokens": prompt, "output_tokens": output}


def _strategy_params(strategy: StrategySpec) -> Iterator[dict[str, Any]]:
    if strategy.cr:
        for cr in strategy.cr:
            yield {"cr": cr}
    elif strategy.segments:
        for segments in strategy.segments:
            yield {"segments": segments}
    else:
        yield {}
