"""The memory bandwidth from real single-device decoder generations (TTFT and TPOT).

A generation's prediction is the twin's own: the ``single`` strategy's decoder plan
(``models.decoder_costs``), each piece of work the launch floor plus the larger of its
FLOP time and its memory traffic over ``memory.bandwidth_gbps`` (``profile.work_ms``).
The compute section comes from the ViT latencies, so the decoder rows fit the one term
they add: the bandwidth, which sets a decode step (every weight read for one position
per sequence) and the LM head of the prefill. Each group (metric, layers, batch,
prompt, output) is represented by its fastest repetition: other work on the machine
only ever slows a generation.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from edgetwin.calibration.group_fit import (
    Bounds,
    ComponentFit,
    GroupKey,
    Predictor,
    fit_groups,
    without_metric,
)
from edgetwin.calibration.readers.decoder_latency import DECODER_LATENCY_FILE, DecoderLatency
from edgetwin.calibration.trace_groups import describe_compute
from edgetwin.calibration.trace_predictors import COMPUTE_BOUNDS
from edgetwin.decoder_spec import DecoderSpec
from edgetwin.models import registry
from edgetwin.models.decoder_costs import DecoderWorkload, Ops, Work
from edgetwin.number_text import counted
from edgetwin.profile import ComputeParams, MemoryParams, work_ms

MEMORY_BOUNDS: Bounds = {"bandwidth_gbps": (0.01, 1e5, 10.0)}
METRICS = ("ttft_ms", "tpot_ms")


def decoder_key(record: DecoderLatency) -> tuple[int, int, int, int]:
    """(layers, batch, prompt tokens, output tokens) of a generation."""
    return (record.layers, record.batch, record.prompt_tokens, record.output_tokens)


def decoder_label(key: GroupKey) -> str:
    """A generation group (``decoder_key``) as its ``decoder_latency.csv`` rows say it:
    ``2 layers, batch 1, prompt 16, 8 out``."""
    layers, batch, prompt_tokens, output_tokens = key
    return f"{counted(layers, 'layer')}, batch {batch}, prompt {prompt_tokens}, {output_tokens} out"


def describe_generation(key: GroupKey) -> tuple[str, str]:
    """A ``decoder_groups`` group's metric (TTFT or TPOT) and point (``Describe``)."""
    return key[0], decoder_label(key[1:])


def decoder_groups(records: Sequence[DecoderLatency]) -> dict[GroupKey, list[float]]:
    """TTFT and TPOT of every repetition, by (metric, layers, batch, prompt, output)."""
    groups: dict[GroupKey, list[float]] = defaultdict(list)
    for record in records:
        for metric in METRICS:
            groups[(metric, *decoder_key(record))].append(getattr(record, metric))
    return dict(groups)


def single_device_ms(
    model: DecoderSpec,
    compute: ComputeParams,
    memory: MemoryParams,
    key: tuple[int, int, int, int],
) -> tuple[float, float]:
    """The twin's TTFT and TPOT of one device generating (layers, batch, prompt, output)."""
    layers, batch, prompt, output = key
    work = DecoderWorkload(model.model_copy(update={"layers": layers}), 1, batch, prompt)
    plan = registry.decoder_plan(registry.baseline().name, work)

    def phase_ms(ops: Ops) -> float:
        return sum(
            work_ms(compute, memory, op.flops, op.memory_bytes, op.rows)
            for op in ops[0]
            if isinstance(op, Work)
        )

    steps = [phase_ms(plan.decode(step)) for step in range(output - 1)]
    return phase_ms(plan.prefill), float(np.mean(steps))


def memory_predictor(model: DecoderSpec, compute: ComputeParams) -> Predictor:
    """TTFT or TPOT of a group, for a memory bandwidth ``params["bandwidth_gbps"]``."""

    @functools.lru_cache(maxsize=4096)
    def times(bandwidth_gbps: float, key: tuple[int, int, int, int]) -> tuple[float, float]:
        return single_device_ms(model, compute, MemoryParams(bandwidth_gbps=bandwidth_gbps), key)

    def predict(params: dict[str, float], key: GroupKey) -> float:
        ttft_ms, tpot_ms = times(params["bandwidth_gbps"], tuple(key[1:]))
        return ttft_ms if key[0] == "ttft_ms" else tpot_ms

    return predict


def fit_memory(
    records: Sequence[DecoderLatency],
    model: DecoderSpec,
    compute: ComputeParams,
    bootstrap: int,
    rng: np.random.Generator,
    on_solve: Callable[[], None] = lambda: None,
) -> ComponentFit:
    """The bandwidth that makes the twin's TTFT and TPOT meet each group's fastest rep
    (``on_solve``: as ``fit_groups``'s)."""
    return fit_groups(
        "memory",
        decoder_groups(records),
        memory_predictor(model, compute),
        describe_generation,
        MEMORY_BOUNDS,
        {},
        bootstrap,
        rng,
        center=np.min,
        point_of=without_metric,
        on_solve=on_solve,
    )


def fit_compute_and_memory(
    latency_groups: Mapping[GroupKey, Sequence[float]],
    latency_predict: Predictor,
    records: Sequence[DecoderLatency],
    model: DecoderSpec,
    fixed: Mapping[str, float],
    bootstrap: int,
    rng: np.random.Generator,
    on_solve: Callable[[], None] = lambda: None,
) -> tuple[ComponentFit, ComponentFit]:
    """One compute model for the device: its ViT latencies and its decoder generations
    fitted together (throughput, launch floor, bandwidth). ``rows_half_util`` stays 0
    unless ``fixed`` sets it: a kernel's FLOPs grow with its rows, so its under-use
    penalty over a few rows is a time proportional to its weights whatever the batch,
    as their memory traffic is; decoder rows cannot tell the two apart, and the
    bandwidth names the cause (the bytes a decode step reads). Each decoder group enters
    as its fastest repetition (so the bootstrap resamples the ViT reps only)."""
    fixed = {"rows_half_util": 0.0, **fixed}
    fastest = {k: [min(v)] for k, v in decoder_groups(records).items()}
    compute_names = tuple(COMPUTE_BOUNDS)

    @functools.lru_cache(maxsize=4096)
    def generation(
        values: tuple[float, ...], key: tuple[int, int, int, int]
    ) -> tuple[float, float]:
        params = dict(zip((*compute_names, "bandwidth_gbps"), values, strict=True))
        compute = ComputeParams(
            sync_host_ms=0.0, sync_host_ms_per_mb=0.0, **{n: params[n] for n in compute_names}
        )
        memory = MemoryParams(bandwidth_gbps=params["bandwidth_gbps"])
        return single_device_ms(model, compute, memory, key)

    def predict(params: dict[str, float], key: GroupKey) -> float:
        if key[0] not in METRICS:
            return latency_predict({n: params[n] for n in compute_names}, key)
        values = (*(params[n] for n in compute_names), params["bandwidth_gbps"])
        ttft_ms, tpot_ms = generation(values, tuple(key[1:]))
        return ttft_ms if key[0] == "ttft_ms" else tpot_ms

    def describe(key: GroupKey) -> tuple[str, str]:
        return describe_generation(key) if key[0] in METRICS else describe_compute(key)

    bounds = {**COMPUTE_BOUNDS, **MEMORY_BOUNDS}
    joint = fit_groups(
        "compute",
        {**latency_groups, **fastest},
        predict,
        describe,
        bounds,
        fixed,
        bootstrap,
        rng,
        point_of=lambda key: without_metric(key) if key[0] in METRICS else key,
        on_solve=on_solve,
    )
    return _part(joint, "compute", compute_names, False), _part(
        joint, "memory", ("bandwidth_gbps",), True
    )


def _part(fit: ComponentFit, section: str, names: Sequence[str], decoder: bool) -> ComponentFit:
    """The parameters ``names`` of a joint fit, with the residuals of its decoder groups
    (``decoder``) or of the others."""

    def keep(mapping: Mapping[str, float]) -> dict[str, float]:
        return {
            n: v
            for n, v in mapping.items()
            if n in names or (not decoder and n not in MEMORY_BOUNDS)
        }

    residuals = [r for r in fit.residuals if (r["metric"] in METRICS) == decoder]
    at_bound = {n: reached for n, reached in fit.at_bound.items() if n in names}
    clipped = {n: shares for n, shares in fit.resamples_at_bound.items() if n in names}
    return ComponentFit(
        section,
        keep(fit.params),
        keep(fit.stderr),
        [keep(s) for s in fit.samples],
        residuals,
        at_bound,
        clipped,
    )


def memory_section(fit: ComponentFit, command: str) -> dict[str, Any]:
    """The profile's memory section from a fit: fitted, with its source."""
    return {
        "bandwidth_gbps": fit.params["bandwidth_gbps"],
        "fitted": True,
        "source": f"fitted to {DECODER_LATENCY_FILE} (TTFT, TPOT) by `{command}`",
    }
