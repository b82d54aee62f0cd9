"""The points of a scenario's sweeps: each a ``Configuration``, what one results row
describes (its labels and columns: ``configuration``); and the scenario keys the sweeps
stand in for, which no run then reads (an override of one is refused)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict

from edgetwin.decoder_spec import DecoderSpec
from edgetwin.errors import InputError, shown
from edgetwin.models import registry
from edgetwin.models.layout import resolved_segments
from edgetwin.scenario import Scenario
from edgetwin.strategy_spec import StrategySpec
from edgetwin.sweep_spec import SWEPT_SCENARIO_KEYS, SweepSpec


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


class SweptKey(NamedTuple):
    """What stands in for a scenario key that no run reads: the sweeps' list ``swept``
    (``bandwidth_mbps``), given by the sweeps ``sweeps`` (their indices)."""

    swept: str
    sweeps: tuple[int, ...]

    @property
    def fields(self) -> str:
        """The sweeps' fields that give the values: ``sweeps.0.bandwidth_mbps, ...``."""
        return ", ".join(f"sweeps.{i}.{self.swept}" for i in self.sweeps)


def swept_keys(scenario: Scenario) -> dict[str, SweptKey]:
    """The scenario keys of ``SWEPT_SCENARIO_KEYS`` that no run of ``scenario`` reads, each
    with what stands in for it: the key is a sweep's default, so it is unread when every
    sweep gives its list (``configurations``), and a crowd's bandwidth when one sweep does
    (``configuration.crowd_bandwidths``: the sweeps' bandwidths, else the network's)."""
    unread = {}
    for swept, key in SWEPT_SCENARIO_KEYS.items():
        giving = tuple(i for i, sweep in enumerate(scenario.sweeps) if getattr(sweep, swept))
        crowd = scenario.crowd is not None and bool(giving)
        if crowd or len(giving) == len(scenario.sweeps):
            unread[key] = SweptKey(swept, giving)
    return unread


def unread_override(scenario: Scenario, overrides: Sequence[str]) -> tuple[int, SweptKey] | None:
    """The first of ``overrides`` (``key=value`` or ``~key``, as applied to make
    ``scenario``) that sets or removes a key no run reads (``swept_keys``): its index and
    what stands in for the key; None when every override is read."""
    unread = swept_keys(scenario)
    for index, item in enumerate(overrides):
        key = override_key(item)
        if key in unread:
            return index, unread[key]
    return None


def override_key(item: str) -> str:
    """The dotted key an override sets (``key=value``) or removes (``~key``)."""
    key, sep, _value = item.partition("=")
    return key if sep else key.removeprefix("~")


def check_overrides_read(scenario: Scenario, overrides: Sequence[str], path: Path) -> None:
    """Refuse an override that no run reads, naming the key and the sweeps that stand in for
    it: ``--set network.bandwidth_mbps=200`` where every sweep gives its bandwidths ran and
    labelled nothing at 200 Mbps, and a comparison with a measurement at 200 said 0 %."""
    found = unread_override(scenario, overrides)
    if found is None:
        return
    index, swept = found
    item = overrides[index]
    every = len(swept.sweeps) == len(scenario.sweeps)
    gives = f"every sweep gives its own {swept.swept}" if every else "a crowd runs its sweeps'"
    problem = f"override {shown(item)} has no effect: {gives} ({swept.fields}); set those instead"
    raise InputError(path, override_key(item), problem)


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
