"""The fits of a ``kind: traces`` spec: planned from the traces (which sections, on which
records, what each sets), then run in order (each fit's solves and its bootstrap's).

A held-out refit (``trace_holdout``) runs the same plan without the records of one batch
size, bandwidth or prompt length.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from edgetwin.calibration.exchange_replay import network_predictor
from edgetwin.calibration.fit_check import TooFewPoints
from edgetwin.calibration.fit_decoder import fit_compute_and_memory, fit_memory
from edgetwin.calibration.group_fit import (
    Bounds,
    ComponentFit,
    GroupKey,
    PredictionOverflow,
    fit_groups,
)
from edgetwin.calibration.held_out import HoldoutBy
from edgetwin.calibration.readers.decoder_latency import DecoderLatency
from edgetwin.calibration.readers.gpu_bench import VitLatency
from edgetwin.calibration.readers.staged_exchange import StagedExchange
from edgetwin.calibration.trace_groups import (
    compute_groups,
    copy_groups,
    describe_comm,
    describe_compute,
    describe_copy,
    describe_staging,
    exchange_gaps,
    exchange_groups,
    staging_groups,
)
from edgetwin.calibration.trace_inputs import (
    FIT_FILES,
    TraceCalibrationSpec,
    TraceData,
    not_fitted_values,
)
from edgetwin.calibration.trace_predictors import (
    COMPUTE_BOUNDS,
    COPY_BOUNDS,
    NETWORK_BOUNDS,
    STAGING_BOUNDS,
    compute_predictor,
    copy_predictor,
    staging_groups_predictor,
)
from edgetwin.errors import InputError
from edgetwin.profile import ComputeParams, DeviceProfile
from edgetwin.progress import Steps, no_progress

# the profile sections a fit sets the parameters of: those of its bounds (and fixed ones)
SECTION_BOUNDS: dict[str, Bounds] = {
    "compute": COMPUTE_BOUNDS,
    "staging": STAGING_BOUNDS,
    "network": NETWORK_BOUNDS,
}


@dataclass(frozen=True)
class PlannedFit:
    """One fit of a plan: the fits it gives (a profile section or a plain copy fit, in
    order) and how to run it (``on_solve`` called after each solve)."""

    names: tuple[str, ...]
    run: Callable[[Callable[[], None]], tuple[ComponentFit, ...]]


def plan_fits(
    spec: TraceCalibrationSpec,
    data: TraceData,
    holdout: Holdout | None = None,
    base: DeviceProfile | None = None,
) -> list[PlannedFit]:
    """The fits of every requested section the data allows, without the ``holdout``
    records; the memory bandwidth on the fitted compute section (else ``base``'s). The
    random draws of the bootstraps follow the plan's order."""
    rng = np.random.default_rng(spec.seed)
    excluded_batch = holdout.value if holdout is not None and holdout.by == "batch" else None
    latencies = [r for r in data.latencies if holdout is None or not holdout.covers(r)]
    exchanges = [r for r in data.exchanges if holdout is None or not holdout.covers(r)]
    not_fitted = not_fitted_values(spec, base)

    def fixed(section: str) -> dict[str, float]:
        prefix = f"{section}."
        values = {k.removeprefix(prefix): v for k, v in not_fitted.items() if k.startswith(prefix)}
        return values | _step_size(section, values, base)

    planned: list[PlannedFit] = []

    def fit_into(names: tuple[str, ...], fit: Callable[..., Any], *args: Any, **kw: Any) -> None:
        def run(on_solve: Callable[[], None]) -> tuple[ComponentFit, ...]:
            fitted = fit(*args, on_solve=on_solve, **kw)
            return fitted if isinstance(fitted, tuple) else (fitted,)

        planned.append(PlannedFit(names, run))

    decoder = [r for r in data.decoder if holdout is None or not holdout.covers(r)]
    with_decoder = "memory" in spec.fit and decoder and spec.decoder is not None
    with_compute = "compute" in spec.fit and latencies
    if with_compute and with_decoder:
        fit_into(
            ("compute", "memory"),
            fit_compute_and_memory,
            compute_groups(latencies),
            compute_predictor(spec.model),
            decoder,
            spec.decoder,
            fixed("compute"),
            spec.bootstrap,
            rng,
        )
    elif with_compute:
        fit_into(
            ("compute",),
            fit_groups,
            "compute",
            compute_groups(latencies),
            compute_predictor(spec.model),
            describe_compute,
            COMPUTE_BOUNDS,
            fixed("compute"),
            spec.bootstrap,
            rng,
        )
    if "staging" in spec.fit and exchanges:
        fit_into(
            ("staging",),
            fit_groups,
            "staging",
            staging_groups(exchanges),
            staging_groups_predictor(),
            describe_staging,
            STAGING_BOUNDS,
            fixed("staging"),
            spec.bootstrap,
            rng,
            point_of=_copied,
        )
    if "staging" in spec.fit:
        for pinned in (True, False):
            copies = [c for c in data.copies if c.pinned == pinned and c.batch != excluded_batch]
            if copies:
                name = "copy_pinned" if pinned else "copy_pageable"
                groups = copy_groups(copies)
                fit_into(
                    (name,),
                    fit_groups,
                    name,
                    groups,
                    copy_predictor,
                    describe_copy,
                    COPY_BOUNDS,
                    {},
                    spec.bootstrap,
                    rng,
                )
    if "network" in spec.fit and exchanges:
        predict = network_predictor(exchange_gaps(exchanges), spec.burst_kb)
        fit_into(
            ("network",),
            fit_groups,
            "network",
            exchange_groups(exchanges, "comm_ms"),
            predict,
            describe_comm,
            NETWORK_BOUNDS,
            fixed("network"),
            spec.bootstrap,
            rng,
        )
    if with_decoder and not with_compute and base is not None:  # on the base's compute
        fit_into(("memory",), fit_memory, decoder, spec.decoder, base.compute, spec.bootstrap, rng)
    return planned


# a section's extra above a size, and that size (None: no extra)
SIZE_STEPS = {
    "staging": ("large_copy_kb", "large_copy_ms"),
    "network": ("large_message_kb", "large_message_ms"),
}


def _step_size(
    section: str, fixed: dict[str, float], base: DeviceProfile | None
) -> dict[str, float]:
    """What a fit of ``section`` takes of the size above which its extra is paid, where the
    spec does not fix it: the base profile's (which the profile keeps), or, where that has
    none, no extra (0, not fitted). The fit ran without the size, so the extra changed no
    prediction: it kept its start (0.05 ms) beside the base's size, or alone, counted as a
    parameter the data had to pin."""
    if section not in SIZE_STEPS or SIZE_STEPS[section][0] in fixed:
        return {}
    size_name, extra_name = SIZE_STEPS[section]
    size = None if base is None else getattr(getattr(base, section), size_name)
    if size is not None:
        return {size_name: size}
    return {} if extra_name in fixed else {extra_name: 0.0}


def planned_parameters(plan: list[PlannedFit]) -> dict[str, set[str]]:
    """The profile parameters the plan's fits set, by section (its fixed ones aside)."""
    return {
        name: set(SECTION_BOUNDS[name])
        for fit in plan
        for name in fit.names
        if name in SECTION_BOUNDS
    }


def run_fits(
    spec_path: Path,
    spec: TraceCalibrationSpec,
    data: TraceData,
    plan: list[PlannedFit],
    holdout: Holdout | None = None,
    progress: Steps = no_progress,
) -> dict[str, ComponentFit]:
    """Each planned fit, in order. A section with too few distinct points for its
    parameters is an InputError naming the file it is fitted from; in a held-out refit it
    is left out instead (its held-out records get no point, and ``trace_holdout`` says
    so). ``progress`` counts the solves (each fit's and its bootstrap resamples')."""
    fits: dict[str, ComponentFit] = {}
    solves = len(plan) * (1 + spec.bootstrap)
    try:
        with progress("fits with bootstrap", solves) as advance:
            for planned in plan:
                try:
                    solved = partial(advance, " and ".join(planned.names))
                    fits.update(zip(planned.names, planned.run(solved), strict=True))
                except TooFewPoints:
                    if holdout is None:
                        raise
    except TooFewPoints as error:
        raise InputError(_file_of(data, error.section), None, error.problem) from None
    except PredictionOverflow as error:
        raise InputError(_file_of(data, error.section), None, str(error)) from None
    return fits


def _copied(key: GroupKey) -> GroupKey:
    """The point of a staging group (phase, bandwidth, batch, rows, bytes, blocks): an
    exchange's shape; its two copies, at any link rate and loop length, are one point (a
    copy depends on neither)."""
    return key[2:5]


def compute_of(fits: dict[str, ComponentFit], base: DeviceProfile | None) -> ComputeParams | None:
    """The compute section a decoder's prediction runs on: the fitted one, else the base's."""
    if "compute" in fits:
        return ComputeParams(
            **{"sync_host_ms": 0.0, "sync_host_ms_per_mb": 0.0, **fits["compute"].params}
        )
    return base.compute if base is not None else None


def _file_of(data: TraceData, fit: str) -> Path:
    """The trace file a fit (a profile section, or a plain copy fit) reads; the folder if
    none is named for it."""
    names = FIT_FILES.get(fit, ())
    return next((path for path in data.files if path.name in names), data.folder)


@dataclass(frozen=True)
class Holdout:
    """Records left out of a fit: one batch size, one link bandwidth or one decoder
    prompt length."""

    by: HoldoutBy
    value: float

    def covers(self, record: VitLatency | StagedExchange | DecoderLatency) -> bool:
        if self.by == "batch":
            return record.batch == self.value
        if self.by == "prompt":
            return isinstance(record, DecoderLatency) and record.prompt_tokens == self.value
        return isinstance(record, StagedExchange) and record.bandwidth_mbps == self.value
