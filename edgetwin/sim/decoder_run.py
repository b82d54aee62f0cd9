"""What the twin's runner does for a decoder: the plan (pipeline stages balanced by the
devices' speed and RAM, as the real runs split them), weights, KV cache and activations
against RAM, the phases, and the row's columns."""

from __future__ import annotations

import math
from typing import Any

from edgetwin import configuration
from edgetwin.configuration import decoder_plan, layer_split, planned_layers
from edgetwin.decoder_spec import kept_positions
from edgetwin.models.decoder_costs import DecoderPlan
from edgetwin.profile import MB
from edgetwin.results import STATUS_OK
from edgetwin.run_failures import OUT_OF_MEMORY
from edgetwin.scenario import Scenario
from edgetwin.sim.device import Device
from edgetwin.sim.generation import Generation
from edgetwin.sweep_points import Configuration


def plan_for(scenario: Scenario, config: Configuration, devices: list[Device]) -> DecoderPlan:
    """The configuration's plan; a layer split the scenario does not size is balanced on
    the devices' profiles and free RAM (``configuration.planned_layers``)."""
    free = [_free_bytes(device) for device in devices]
    stages = planned_layers(scenario, config, [d.profile for d in devices], free)
    return decoder_plan(scenario, config, stages)


def memory_status(
    scenario: Scenario,
    config: Configuration,
    plan: DecoderPlan,
    devices: list[Device],
    tokens: int,
) -> str:
    """Load each device's weights; ``ok`` if they, the KV cache of all ``tokens`` positions
    (the real code allocates it before the prefill) and the activations at their peak fit
    every device (``DecoderPlan.need_bytes``), else the out-of-memory status: in the
    prefill, or at the first decode position whose step's activations do not fit; where
    the layer split was balanced and none holds the generation, why after it
    (``configuration.split_shortfall``, on the RAM ``plan_for`` split)."""
    free = [_free_bytes(device) for device in devices]  # before the weights are loaded
    status = _memory_status(plan, devices, tokens)
    if status == STATUS_OK:
        return status
    shortfall = configuration.split_shortfall(scenario, config, free)
    return status if shortfall is None else f"{status}: {shortfall}"


def _memory_status(plan: DecoderPlan, devices: list[Device], tokens: int) -> str:
    for rank, device in enumerate(devices):
        if not device.load(plan.weight_bytes[rank] / MB):
            return f"{OUT_OF_MEMORY} on {device.name} (weights)"
    for rank, device in enumerate(devices):
        if plan.need_bytes(rank, tokens) > _free_bytes(device):
            return f"{OUT_OF_MEMORY} on {device.name} (prefill)"
    stops = [
        (position, device.name)
        for rank, device in enumerate(devices)
        if (position := _first_overflow(plan, rank, device, tokens)) is not None
    ]
    if not stops:
        return STATUS_OK
    position, name = min(stops)
    return f"{OUT_OF_MEMORY} on {name} at token {position}"


def _free_bytes(device: Device) -> float:
    return (device.ram_mb - device.resident_mb) * MB


def _first_overflow(plan: DecoderPlan, rank: int, device: Device, tokens: int) -> int | None:
    """The first decode position (1-based, after the prompt) whose step's activations no
    longer fit the device's free RAM next to the whole KV cache (the prefill's fit): they
    grow with the context through the keys and values repeated to the query heads."""
    free_bytes = _free_bytes(device)
    prompt = plan.workload.prompt_tokens
    if tokens <= prompt or plan.need_bytes(rank, tokens, tokens - 1) <= free_bytes:
        return None
    low, high = prompt + 1, tokens  # grows with the positions: bisect
    while low < high:
        middle = (low + high) // 2
        if plan.need_bytes(rank, tokens, middle - 1) > free_bytes:
            high = middle
        else:
            low = middle + 1
    return low


def generation_columns(
    plan: DecoderPlan,
    config: Configuration,
    generation: Generation,
    devices: list[Device],
    ok: bool,
) -> dict[str, Any]:
    """The row's timing and memory columns; times NaN unless the run finished. TTFT and
    total: when rank 0 holds the first and the last token."""
    assert config.prompt_tokens is not None and config.output_tokens is not None
    kept = kept_positions(config.prompt_tokens, config.output_tokens)
    weight_bytes, kv_bytes = plan.tightest(kept, [d.ram_mb * MB for d in devices])
    memory = {
        "weights_mb": weight_bytes / MB,
        "kv_cache_mb": kv_bytes / MB,
        "layer_split": layer_split(plan),
    }
    terminal = generation.times[0]
    tokens = config.batch * config.output_tokens
    if not ok:
        nan = math.nan
        return {**memory, "compute_ms": nan, "staging_ms": nan, "comm_ms": nan}
    # rank 0, the terminal, holds each token at the end of its phase (as the real code's
    # token_ms): a slower rank may still be finishing its own copy of the last token
    ttft_ms = generation.phase_end_ms[0][0] - generation.start_ms
    total_ms = generation.phase_end_ms[0][-1] - generation.start_ms
    energy_j = sum(d.total_energy_j for d in devices)
    later = config.output_tokens - 1
    return {
        **memory,
        "compute_ms": terminal.compute_ms,
        "staging_ms": terminal.staging_ms,
        "comm_ms": terminal.comm_ms,
        "total_ms": total_ms,
        "ttft_ms": ttft_ms,
        "tpot_ms": (total_ms - ttft_ms) / later if later else None,
        "tokens_per_s": tokens / (total_ms / 1e3),
        "energy_j": energy_j,
        "energy_per_token_j": energy_j / tokens,
    }
