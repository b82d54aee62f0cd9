"""A launch's deadline on the emulator's shaped links allows for its bytes at their rate
(no root: the deadline the launcher is handed). Until 2026-12-07 it counted the start-up
and the FLOPs alone: emu_smoke's Voltage launch at 0.2 Mbps (3 MB a forward, over a
minute each at that rate, four forwards) had 161 s, and one with a warm-up and a
repetition ran past its 147 s in the emulator."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from edgetwin.configuration import decoder_plan
from edgetwin.decoder_spec import DecoderSpec
from edgetwin.emu.llm.local_rows import decoder_rows
from edgetwin.emu.local import ELEMENT_BYTES, measure_local
from edgetwin.models import registry
from edgetwin.models.decoder_costs import contributed_bytes
from edgetwin.scenario import Scenario, validate_scenario
from edgetwin.sweep_points import configurations

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
RATE_MBPS = 0.2
pytestmark = pytest.mark.timeout(60)


class _Handed(Exception):
    """The launcher was handed its deadline; nothing is started."""


def _scenario(
    name: str,
    strategy: dict[str, Any],
    sweep: dict[str, Any],
    schedule: list[Any] | None = None,
    latency_ms: float = 0.0,
) -> Scenario:
    """Shipped scenario ``name`` with one strategy, one sweep, a ``network.schedule`` and
    a ``network.latency_ms``."""
    raw: dict[str, Any] = yaml.safe_load((SCENARIOS / name).read_text())
    raw["strategies"] = [strategy]
    raw["sweeps"] = [sweep]
    raw.setdefault("network", {})["schedule"] = schedule or []
    raw["network"]["latency_ms"] = latency_ms
    return validate_scenario(raw, SCENARIOS / name)


def _vit_deadline_s(scenario: Scenario, shaped: bool) -> float:
    handed: list[float] = []

    def launch(args: Sequence[str], world: int, timeout_s: float, *_: object) -> list[Any]:
        handed.append(timeout_s)
        raise _Handed

    with pytest.raises(_Handed):
        next(measure_local(scenario, launch=launch, shaped=shaped))
    return handed[0]


def _decoder_deadline_s(scenario: Scenario, shaped: bool) -> float:
    handed: list[float] = []

    def launch(run: object, timeout_s: float, *_: object) -> list[Any]:
        handed.append(timeout_s)
        raise _Handed

    with pytest.raises(_Handed):
        next(decoder_rows(scenario, 1, launch=launch, shaped=shaped))
    return handed[0]


def test_a_vit_launch_on_shaped_links_has_time_for_its_bytes() -> None:
    sweep = {"batch": [2], "bandwidth_mbps": [RATE_MBPS], "devices": [2]}
    scenario = _scenario("emu_smoke.yaml", {"name": "voltage"}, sweep)
    (config,) = configurations(scenario)
    model = scenario.encoder
    work = registry.cost_plan(model, "voltage", 2)
    per_forward = work.contributed_bytes(config.batch, model.blocks, model.width * ELEMENT_BYTES)
    forwards = scenario.real_warmups + scenario.repetitions
    on_the_wire_s = forwards * per_forward * 8 / (RATE_MBPS * 1e6)
    assert _vit_deadline_s(scenario, shaped=True) > on_the_wire_s
    # on loopback (local mode) the rate is nominal: the deadline stays the FLOPs'
    assert _vit_deadline_s(scenario, shaped=False) < on_the_wire_s


def test_a_schedules_slowest_step_counts() -> None:
    """Links at 800 Mbps and a step to 0.2 Mbps: the launch's bytes count at 0.2 Mbps."""
    sweep = {"batch": [2], "bandwidth_mbps": [800], "devices": [2]}
    fast = _scenario("emu_smoke.yaml", {"name": "voltage"}, sweep)
    step = [{"at_ms": 10, "bandwidth_mbps": RATE_MBPS}]
    stepped = _scenario("emu_smoke.yaml", {"name": "voltage"}, sweep, schedule=step)
    slow_sweep = {**sweep, "bandwidth_mbps": [RATE_MBPS]}
    slow = _scenario("emu_smoke.yaml", {"name": "voltage"}, slow_sweep)
    assert _vit_deadline_s(stepped, shaped=True) == _vit_deadline_s(slow, shaped=True)
    assert _vit_deadline_s(fast, shaped=True) < _vit_deadline_s(stepped, shaped=True)


def test_a_decoder_launch_on_shaped_links_has_time_for_its_bytes() -> None:
    sweep = {"batch": [1], "bandwidth_mbps": [RATE_MBPS], "devices": [2]}
    scenario = _scenario("llm_smoke.yaml", {"name": "tensor_parallel"}, sweep)
    (config,) = configurations(scenario)
    assert config.output_tokens is not None
    phases = decoder_plan(scenario, config, None).phases(config.output_tokens)
    generations = scenario.real_warmups + scenario.repetitions
    on_the_wire_s = generations * contributed_bytes(phases) * 8 / (RATE_MBPS * 1e6)
    assert _decoder_deadline_s(scenario, shaped=True) > on_the_wire_s
    assert _decoder_deadline_s(scenario, shaped=False) < on_the_wire_s


def test_a_decoder_launch_over_a_high_latency_link_has_time_for_its_messages() -> None:
    """Tensor parallelism's decode steps are small messages the ranks wait for in turn:
    two all-reduces a layer (the attention's, the FFN's), each two ring steps on two ranks,
    in the prefill and in each decode step, and GLOO's ring step takes a round trip (its
    data, then the receiver's notification back). Over links of 250 ms one way,
    llm_smoke's three generations (two warm-ups, a repetition) wait 384 s on latency alone,
    where their bytes take a tenth of a second at 400 Mbps. Until 2026-12-07 the deadline
    counted the bytes alone: 134 s, and the launch failed past it in the emulator (where
    a generation took 135 s, 0.53 s a ring step)."""
    latency_ms = 250.0
    sweep = {"batch": [1], "devices": [2]}
    scenario = _scenario(
        "llm_smoke.yaml", {"name": "tensor_parallel"}, sweep, latency_ms=latency_ms
    )
    (config,) = configurations(scenario)
    assert config.output_tokens is not None and isinstance(scenario.model, DecoderSpec)
    passes = config.output_tokens  # the prefill and output_tokens - 1 decode steps
    steps = passes * scenario.model.layers * 2 * 2
    generations = scenario.real_warmups + scenario.repetitions
    waited_s = generations * steps * 2 * latency_ms / 1e3
    assert _decoder_deadline_s(scenario, shaped=True) > waited_s
    assert _decoder_deadline_s(scenario, shaped=False) < waited_s  # loopback: no latency
