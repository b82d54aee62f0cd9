"""Trace columns whose times are slower than the slowest device a trace fit takes, by
their values: a column read in ms that holds microseconds (values 1000x too large) reads
as a device 1000x slower, and the fit followed it without a word (a ViT-B/16 forward of
a Jetson at 100,000 ms). The unit is told by the header alone and nothing is converted
(docs/traces.md); these checks only warn.

The slowest device is the one at the bounds of the fits (``trace_predictors``): compute
at the least throughput and the longest launch floor (10 GFLOP/s, 20 ms a kernel group),
a GPU<->host copy at the longest fixed time and the most ms per MB (20 ms + 100 ms/MB,
10 MB/s), and the host->GPU copy of a gathered tensor at the most copies its
concatenation takes (20x). A column is named when even the fastest repetition of its
fastest group, for its FLOPs or its bytes, takes longer than that device (load only ever
slows a repetition). A fast GPU's trace in microseconds is within them (an H200's compute
reads as a CPU of 43 GFLOP/s): ``unit_consistency`` names its columns by the power log's
clock or another column of the file, where the folder has them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from edgetwin.calibration.group_fit import GroupKey
from edgetwin.calibration.readers.gpu_bench import STAGING_COPY_FILE, VIT_LATENCY_FILE
from edgetwin.calibration.trace_groups import (
    LATENCY_MS,
    compute_groups,
    compute_label,
    copy_groups,
    copy_label,
    exchange_groups,
    exchange_label,
)
from edgetwin.calibration.trace_inputs import TraceData
from edgetwin.calibration.trace_predictors import (
    COMPUTE_BOUNDS,
    STAGING_BOUNDS,
    compute_predictor,
)
from edgetwin.calibration.unit_consistency import (
    MICROSECONDS,
    Found,
    contradicted_columns,
    exchange_files,
)
from edgetwin.model_spec import ModelSpec
from edgetwin.number_text import exact_text
from edgetwin.profile import StagingParams

SLOWEST_COMPUTE = {
    "throughput_gflops": COMPUTE_BOUNDS["throughput_gflops"][0],
    "launch_floor_ms": COMPUTE_BOUNDS["launch_floor_ms"][1],
    "rows_half_util": 0.0,
}
SLOWEST_COPY = StagingParams(
    fixed_ms=STAGING_BOUNDS["fixed_ms"][1], ms_per_mb=STAGING_BOUNDS["ms_per_mb"][1]
)
COMPUTE_DEVICE = (
    f"{exact_text(SLOWEST_COMPUTE['throughput_gflops'])} GFLOP/s and "
    f"{exact_text(SLOWEST_COMPUTE['launch_floor_ms'])} ms a kernel group"
)
COPY_DEVICE = (
    f"{exact_text(SLOWEST_COPY.fixed_ms)} ms + {exact_text(SLOWEST_COPY.ms_per_mb)} ms/MB a copy"
)
# h2d concatenates the gathered pieces before it copies them back: up to this many copies
MOST_GATHERED = STAGING_BOUNDS["gathered_factor"][1]
GATHERED_DEVICE = f"{exact_text(MOST_GATHERED)}x ({COPY_DEVICE}) for the gathered tensor"


def slow_columns(data: TraceData, model: ModelSpec) -> list[str]:
    """One line per trace column of ``data`` slower than the slowest device a fit takes, or
    that the power log's clock or another column contradicts (``unit_consistency``):
    ``FILE: field 'COLUMN': ...``, saying what that suggests; none when no column is."""
    found: list[Found] = []
    predict = compute_predictor(model)
    slowest_compute = _slowest(
        compute_groups(data.latencies),
        lambda key: predict(SLOWEST_COMPUTE, key),
        compute_label,
        COMPUTE_DEVICE,
    )
    if slowest_compute is not None:
        found.append((VIT_LATENCY_FILE, LATENCY_MS, slowest_compute))
    slowest_copy = _slowest(
        copy_groups(data.copies),
        lambda key: SLOWEST_COPY.copy_ms(key[1]),
        copy_label,
        COPY_DEVICE,
    )
    if slowest_copy is not None:
        found.append((STAGING_COPY_FILE, LATENCY_MS, slowest_copy))
    for name, records in exchange_files(data):
        # the copy of the piece sent, and the gathered tensor's (two ranks' pieces)
        for phase, slowest_ms, device in (
            ("d2h_ms", lambda key: SLOWEST_COPY.copy_ms(key[3]), COPY_DEVICE),
            (
                "h2d_ms",
                lambda key: MOST_GATHERED * SLOWEST_COPY.copy_ms(2 * key[3]),
                GATHERED_DEVICE,
            ),
        ):
            slowest = _slowest(
                exchange_groups(records, phase),
                slowest_ms,
                lambda key: f"{exchange_label(key)}, a block",  # the loop's time / its blocks
                device,
            )
            if slowest is not None:
                found.append((name, phase, slowest))
    lines: dict[tuple[str, str], str] = {}  # a column once, by the first check naming it
    for name, column, problem in [*found, *contradicted_columns(data)]:
        lines.setdefault((name, column), _named(data, name, column, problem))
    return list(lines.values())


def _slowest(
    groups: Mapping[GroupKey, list[float]],
    slowest_ms: Callable[[GroupKey], float],
    label: Callable[[GroupKey], str],
    device: str,
) -> str | None:
    """What is wrong with ``groups`` (times in ms) when even the fastest repetition of the
    fastest takes longer than ``slowest_ms`` (the slowest ``device``'s time for it)."""
    if not groups:
        return None
    share = {key: slowest_ms(key) / min(times) for key, times in groups.items()}
    fastest = max(share, key=lambda key: share[key])
    if share[fastest] >= 1.0:
        return None
    return (
        f"even the fastest group ({label(fastest)}: {min(groups[fastest]):,.0f} ms at best) "
        f"takes {1 / share[fastest]:.0f}x as long as the slowest device a fit takes "
        f"({device}): {MICROSECONDS}"
    )


def _named(data: TraceData, name: str, column: str, problem: str) -> str:
    """``problem`` with the trace file ``name`` of ``data`` and its ``column``, as an error
    names them."""
    path = next((p for p in data.files if p.name == name), Path(data.folder) / name)
    return f"{path}: field '{column}': {problem}"
