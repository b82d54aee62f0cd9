"""Held-out validation of a ``kind: traces`` fit: refit without each batch size (or
bandwidth, or prompt length) and predict what was left out."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edgetwin.calibration.exchange_replay import network_predictor
from edgetwin.calibration.fit_check import TOO_FEW_LEFT
from edgetwin.calibration.fit_decoder import (
    METRICS,
    decoder_key,
    decoder_label,
    single_device_ms,
)
from edgetwin.calibration.group_fit import ComponentFit, GroupKey
from edgetwin.calibration.held_out import HeldOutRefits, HoldoutBy
from edgetwin.calibration.readers.decoder_latency import DecoderLatency
from edgetwin.calibration.readers.gpu_bench import VIT_FULL, VitLatency
from edgetwin.calibration.readers.staged_exchange import StagedExchange
from edgetwin.calibration.trace_fits import Holdout, compute_of, plan_fits, run_fits
from edgetwin.calibration.trace_groups import (
    compute_groups,
    compute_label,
    exchange_key,
    exchange_label,
)
from edgetwin.calibration.trace_inputs import (
    SECTION_FILES,
    Section,
    TraceCalibrationSpec,
    TraceData,
    TraceInputs,
    read_inputs,
)
from edgetwin.calibration.trace_predictors import compute_predictor, staging_predictor
from edgetwin.comparison import relative_pct
from edgetwin.number_text import exact_text
from edgetwin.profile import DeviceProfile, MemoryParams
from edgetwin.progress import Steps, no_progress


def leave_one_out(spec_path: Path, by: HoldoutBy, progress: Steps = no_progress) -> HeldOutRefits:
    """Refit without each batch size (or bandwidth, or prompt length) and predict what was
    left out: the whole-model latency, the staged exchange total of a forward, and a
    decoder generation's TTFT and TPOT; a warning for each section a value leaves too little
    to refit. ``progress`` counts the refits."""
    inputs = read_inputs(spec_path)
    data = inputs.data
    values: set[float]
    if by == "batch":
        values = {r.batch for r in data.latencies} | {r.batch for r in data.exchanges}
        values |= {r.batch for r in data.decoder}
    elif by == "prompt":
        values = {r.prompt_tokens for r in data.decoder}
    else:
        values = {r.bandwidth_mbps for r in data.exchanges if r.bandwidth_mbps is not None}
    points: list[dict[str, Any]] = []
    warnings: list[str] = []
    with progress(f"held-out refits (by {by})", len(values)) as advance:
        for value in sorted(values):
            refit = refit_without(spec_path, inputs, Holdout(by, value))
            points += refit.points
            warnings += refit.warnings
            advance(f"{by} {exact_text(value)} held out")
    return HeldOutRefits(points, warnings)


def refit_without(spec_path: Path, inputs: TraceInputs, holdout: Holdout) -> HeldOutRefits:
    """One refit of ``leave_one_out``: the spec at ``spec_path`` (read as ``inputs``) fitted
    without the records ``holdout`` covers (no bootstrap), and its predictions of them."""
    spec = inputs.spec.model_copy(update={"bootstrap": 0})
    data, base = inputs.data, inputs.base
    plan = plan_fits(spec, data, holdout, base)
    fits = run_fits(spec_path, spec, data, plan, holdout)
    points: list[dict[str, Any]] = []
    if "compute" in fits:
        points += _compute_points(spec, data, fits["compute"], holdout)
    if "staging" in fits:
        points += _exchange_points(spec, data, fits, holdout)
    if "memory" in fits:
        points += _decoder_points(spec, data, fits, holdout, base)
    return HeldOutRefits(points, _unrefitted_warnings(spec, data, fits, holdout))


def _compute_points(
    spec: TraceCalibrationSpec, data: TraceData, compute: ComponentFit, holdout: Holdout
) -> list[dict[str, Any]]:
    """The held-out ViT latencies (whole model and per part) against the refit's compute."""
    predict = compute_predictor(spec.model)
    points = []
    for key, reps in compute_groups(data.latencies).items():
        if holdout.covers(VitLatency(key[0], key[1], key[2], 0, 0.0)):
            predicted, label = predict(compute.params, key), compute_label(key)
            if key[0] == VIT_FULL:
                points.append(_point("vit_full_ms", label, reps, predicted, holdout.value))
            points.append(_point("compute_ms", label, reps, predicted, holdout.value))
    return points


def _unrefitted_warnings(
    spec: TraceCalibrationSpec, data: TraceData, fits: dict[str, ComponentFit], holdout: Holdout
) -> list[str]:
    """A warning for each section the held-out value leaves with no record, or too few
    distinct points, to refit, naming the trace files of the folder it is refitted from
    (not those absent): its held-out records get no point, where they would otherwise be
    left out without a word."""
    held: list[
        tuple[tuple[Section, ...], str, Sequence[VitLatency | StagedExchange | DecoderLatency]]
    ] = [
        (("compute",), "compute", data.latencies),
        (("staging", "network"), "exchange", data.exchanges),
        (("memory",), "decoder", data.decoder),
    ]
    warnings = []
    read = {path.name for path in data.files}
    for sections, points, records in held:
        unrefitted = [s for s in sections if s in spec.fit and s not in fits]
        if unrefitted and any(map(holdout.covers, records)):
            kept = any(not holdout.covers(record) for record in records)
            if unrefitted[0] == "network":  # its copies are the staging refit's points
                points = "comm"
            # the files of the folder it reads (an exchange's: loopback, shaped or both)
            files = [name for name in SECTION_FILES[unrefitted[0]] if name in read]
            warnings.append(
                f"validation: {holdout.by} {exact_text(holdout.value)} gives no held-out {points} "
                "points:"
                f" without it, {' and '.join(files)} hold{'s' * (len(files) == 1)}"
                f" {f'{TOO_FEW_LEFT} distinct points' if kept else 'no record'} to refit"
                f" {unrefitted[0]} from"
            )
    return warnings


def _decoder_points(
    spec: TraceCalibrationSpec,
    data: TraceData,
    fits: dict[str, ComponentFit],
    holdout: Holdout,
    base: DeviceProfile | None,
) -> list[dict[str, Any]]:
    """TTFT and TPOT of each held-out generation group against its fastest repetition."""
    assert spec.decoder is not None
    compute = compute_of(fits, base)
    assert compute is not None
    memory = MemoryParams(**fits["memory"].params)
    groups: dict[GroupKey, list[DecoderLatency]] = {}
    for record in data.decoder:
        if holdout.covers(record):
            groups.setdefault(decoder_key(record), []).append(record)
    points = []
    for key, records in groups.items():
        predicted = dict(
            zip(METRICS, single_device_ms(spec.decoder, compute, memory, key), strict=True)
        )
        for metric in METRICS:
            fastest = [min(getattr(r, metric) for r in records)]
            label = decoder_label(key)
            points.append(_point(metric, label, fastest, predicted[metric], holdout.value))
    return points


def _exchange_points(
    spec: TraceCalibrationSpec,
    data: TraceData,
    fits: dict[str, ComponentFit],
    holdout: Holdout,
) -> list[dict[str, Any]]:
    """The held-out staged exchanges against the refit's staging (their copies) and, where
    the network was refitted too, its comm and their total. The loop is replayed with the
    refit's copy times as the gaps between messages (in which a token bucket refills), not
    the held-out records' measured ones: those are what is predicted, and the twin has only
    its own. The copies need the staging refit alone: a network taken from a base profile
    left them without held-out points, and the twin's staging band not known."""
    d2h, h2d = staging_predictor("d2h_ms"), staging_predictor("h2d_ms")
    held: dict[GroupKey, list[StagedExchange]] = {}
    for record in data.exchanges:
        if holdout.covers(record):
            held.setdefault(exchange_key(record), []).append(record)
    staging = fits["staging"].params
    copies_ms = {key: d2h(staging, key) + h2d(staging, key) for key in held}
    comm = network_predictor(copies_ms, spec.burst_kb)
    points = []
    for key, records in held.items():
        blocks = key[-1]  # the loop its records ran (exchange_key)
        label = exchange_label(key)
        parts = {"staging_ms": blocks * copies_ms[key]}
        measured = {"staging_ms": [r.d2h_ms + r.h2d_ms for r in records]}
        if "network" in fits:
            parts["comm_ms"] = blocks * comm(fits["network"].params, key)
            measured["comm_ms"] = [r.comm_ms for r in records]
            total = [r.total_ms for r in records]
            point = _point("exchange_total_ms", label, total, sum(parts.values()), holdout.value)
            points.append({**point, "parts": parts})
        for metric, predicted in parts.items():
            points.append(_point(metric, label, measured[metric], predicted, holdout.value))
    return points


def _point(
    metric: str, label: str, reps: list[float], predicted: float, held_out: float
) -> dict[str, Any]:
    """One held-out group (``label``: what its trace rows measured): its mean against the
    prediction; ``reps`` and ``held_out`` (the value left out of its fit) for the
    prediction intervals' residuals."""
    measured = float(np.mean(reps))
    return {
        "metric": metric,
        "point": label,
        "measured": round(measured, 4),
        "predicted": round(predicted, 4),
        "error_pct": round(relative_pct(predicted, measured), 2),
        "held_out": held_out,
        "reps": reps,
    }
