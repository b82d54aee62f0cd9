"""Trace time columns that another clock or column of the same folder contradicts, as a
column of microseconds read in ms (values 1000x too large) is, whatever the device. A fast
GPU's microseconds read as a slower device's milliseconds, within every bound of a fit
(``unit_check``), but not within these:

- the power log's clock (``t_s``, seconds): the timed repetitions of a labelled phase
  take no longer together than the phase lasted (``vit_b<batch>``: that batch's
  ``vit_full`` rows; ``gloo``: each time column of an exchange file);
- a staged exchange's phases (``d2h_ms``, ``comm_ms``, ``h2d_ms``) are parts of the loop
  whose wall time is its ``total_ms``: none takes longer than the loop (in the median row);
- a decoder's later token (``tpot_ms``, one step) does no more work than the prefill and
  first token (``ttft_ms``: the same weights over the prompt's rows), and the prefill no
  more than a step per prompt token and one.

A real trace is within each by its nature (1x at most); a column is named where it is
``FACTOR`` times past it (a ViT in every batch's phase, an exchange's phase in its median
row, a decoder's in every group), which microseconds are by ~1000x. Nothing is converted."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from edgetwin.calibration.readers.decoder_latency import DECODER_LATENCY_FILE, DecoderLatency
from edgetwin.calibration.readers.energy import energy_by_phase
from edgetwin.calibration.readers.gpu_bench import VIT_FULL, VIT_LATENCY_FILE
from edgetwin.calibration.readers.staged_exchange import (
    BANDWIDTH_FILE,
    LOOPBACK_FILE,
    StagedExchange,
)
from edgetwin.calibration.trace_groups import LATENCY_MS
from edgetwin.calibration.trace_inputs import TraceData
from edgetwin.number_text import figure_text

FACTOR = 10.0  # how far past what the other clock or column allows a column is named
EXCHANGE_PARTS = ("d2h_ms", "comm_ms", "h2d_ms")  # the phases of a loop's total_ms
MICROSECONDS = (
    "are these microseconds (values 1000x too large)? The column is read in ms and no "
    "unit is converted (docs/traces.md): if so, give the values in ms and fit again"
)
# a trace file's name, its column and what is wrong with it
Found = tuple[str, str, str]


def contradicted_columns(data: TraceData) -> list[Found]:
    """The time columns of ``data`` that its power log's clock or another column of their
    file contradicts: file name, column and what is wrong; none where none is."""
    found = _over_the_clock(data)
    for name, records in exchange_files(data):
        found += _longer_than_the_loop(name, records)
    found += _decoder_steps(data.decoder)
    return [(name, column, f"{why}: {MICROSECONDS}") for name, column, why in found]


def _over_the_clock(data: TraceData) -> list[Found]:
    """Columns whose repetitions add up to more than their phase of the power log lasted:
    a ViT's ``latency_ms`` (its ``vit_full`` rows of each batch against ``vit_b<batch>``,
    the least past it) and each time column of an exchange file (against ``gloo``)."""
    if len(data.power) < 2:
        return []
    lasted_s = {p.phase: p.duration_s for p in energy_by_phase(data.power)}
    timed_ms: dict[str, float] = defaultdict(float)
    for record in data.latencies:
        if record.kernel == VIT_FULL and f"vit_b{record.batch}" in lasted_s:
            timed_ms[f"vit_b{record.batch}"] += record.latency_ms
    times = {phase: ms / 1e3 / lasted_s[phase] for phase, ms in timed_ms.items()}
    found: list[Found] = []
    if times and min(times.values()) > FACTOR:
        phase = min(times, key=lambda p: times[p])
        found.append((VIT_LATENCY_FILE, LATENCY_MS, _clock_line(phase, timed_ms[phase], lasted_s)))
    if "gloo" not in lasted_s:
        return found
    for name, records in exchange_files(data):
        for column in (*EXCHANGE_PARTS, "total_ms"):
            total_ms = sum(getattr(record, column) for record in records)
            if total_ms / 1e3 > FACTOR * lasted_s["gloo"]:
                found.append((name, column, _clock_line("gloo", total_ms, lasted_s)))
    return found


def _clock_line(phase: str, timed_ms: float, lasted_s: dict[str | None, float]) -> str:
    return (
        f"its repetitions of the power log's {phase} phase add up to {timed_ms / 1e3:,.1f} s,"
        f" {timed_ms / 1e3 / lasted_s[phase]:,.0f}x as long as the phase lasted on the log's"
        f" clock ({figure_text(lasted_s[phase])} s, t_s)"
    )


def _longer_than_the_loop(name: str, records: Sequence[StagedExchange]) -> list[Found]:
    """An exchange file's phase columns longer than the loop they are parts of
    (``total_ms``) in the median row (a phase 1000x too large can stay within a loop whose
    other phases are 1000x as long, the largest messages' comm on a slow link)."""
    found: list[Found] = []
    for part in EXCHANGE_PARTS:
        median = float(np.median([getattr(r, part) / r.total_ms for r in records]))
        if median > FACTOR:
            why = f"its median row takes {median:,.0f}x as long as the loop it is a phase of"
            found.append((name, part, f"{why} (total_ms)"))
    return found


def _decoder_steps(records: Sequence[DecoderLatency]) -> list[Found]:
    """``tpot_ms`` longer than the prefill and first token (``ttft_ms``), or ``ttft_ms``
    longer than a step per prompt token and one, in every generation group (its medians)."""
    groups: dict[tuple[int, ...], list[DecoderLatency]] = defaultdict(list)
    for r in records:
        groups[(r.layers, r.batch, r.prompt_tokens, r.output_tokens)].append(r)
    if not groups:
        return []
    step_over_prefill, prefill_over_steps = [], []
    for (_layers, _batch, prompt, _out), group in groups.items():
        ttft = float(np.median([r.ttft_ms for r in group]))
        tpot = float(np.median([r.tpot_ms for r in group]))
        step_over_prefill.append(tpot / ttft)
        prefill_over_steps.append(ttft / ((prompt + 1) * tpot))
    found: list[Found] = []
    if min(step_over_prefill) > FACTOR:
        why = (
            f"a later token's step takes at least {min(step_over_prefill):,.0f}x as long as the"
            " prefill and first token (ttft_ms) in every group, which read the same weights"
        )
        found.append((DECODER_LATENCY_FILE, "tpot_ms", why))
    if min(prefill_over_steps) > FACTOR:
        why = (
            f"the prefill and first token take at least {min(prefill_over_steps):,.0f}x as long"
            " as a step (tpot_ms) per prompt token and one in every group"
        )
        found.append((DECODER_LATENCY_FILE, "ttft_ms", why))
    return found


def exchange_files(data: TraceData) -> list[tuple[str, list[StagedExchange]]]:
    """Each exchange file of ``data`` with its records (rank 0's: the loopback file's)."""
    files = [
        (LOOPBACK_FILE, [r for r in data.exchanges if r.bandwidth_mbps is None]),
        (BANDWIDTH_FILE, [r for r in data.exchanges if r.bandwidth_mbps is not None]),
    ]
    return [(name, records) for name, records in files if records]
