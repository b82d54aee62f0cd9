"""Trace columns whose times are slower than the slowest device a trace fit takes, by
their values: a column read in ms that holds microseconds (values 1000x too large) reads
as a device 1000x slower, and the fit followed it without a word (a ViT-B/16 forward of
a Jetson at 100,000 ms). The unit is told by the header alone and nothing is converted
(docs/traces.md); these checks only warn.

The slowest device is the one at the bounds of the fits (``trace_predictors``): compute
at the least throughput and the longest launch floor (10 GFLOP/s, 20 ms a kernel group),
a GPU<->host copy at the longest fixed time and the most ms per MB (20 ms + 100 ms/MB,
10 MB/s). A column is named when even the fastest repetition of its fastest group, for
its FLOPs or its bytes, takes longer than that device (load only ever slows a
repetition). A fast GPU's compute trace in microseconds is within them (an H200's reads
as a CPU of 43 GFLOP/s, the fit's launch floor at its bound, which is warned of)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from edgetwin.calibration.group_fit import GroupKey
from edgetwin.calibration.readers.gpu_bench import STAGING_COPY_FILE, VIT_LATENCY_FILE
from edgetwin.calibration.readers.staged_exchange import BANDWIDTH_FILE, LOOPBACK_FILE
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
from edgetwin.model_spec import ModelSpec
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
    f"{SLOWEST_COMPUTE['throughput_gflops']:g} GFLOP/s and "
    f"{SLOWEST_COMPUTE['launch_floor_ms']:g} ms a kernel group"
)
COPY_DEVICE = f"{SLOWEST_COPY.fixed_ms:g} ms + {SLOWEST_COPY.ms_per_mb:g} ms/MB a copy"


def slow_columns(data: TraceData, model: ModelSpec) -> list[str]:
    """One line per trace column of ``data`` slower than the slowest device a fit takes
    (``FILE: field 'COLUMN': ...``), saying what that suggests; none when no column is."""
    lines = []
    predict = compute_predictor(model)
    slowest_compute = _slowest(
        compute_groups(data.latencies),
        lambda key: predict(SLOWEST_COMPUTE, key),
        compute_label,
        COMPUTE_DEVICE,
    )
    if slowest_compute is not None:
        lines.append(_named(data, VIT_LATENCY_FILE, LATENCY_MS, slowest_compute))
    slowest_copy = _slowest(
        copy_groups(data.copies),
        lambda key: SLOWEST_COPY.copy_ms(key[1]),
        copy_label,
        COPY_DEVICE,
    )
    if slowest_copy is not None:
        lines.append(_named(data, STAGING_COPY_FILE, LATENCY_MS, slowest_copy))
    for name, shaped in ((LOOPBACK_FILE, False), (BANDWIDTH_FILE, True)):
        records = [r for r in data.exchanges if (r.bandwidth_mbps is not None) == shaped]
        # the copy of the piece sent (h2d concatenates too: a fit takes it up to 20x slower)
        slowest_d2h = _slowest(
            exchange_groups(records, "d2h_ms"),
            lambda key: SLOWEST_COPY.copy_ms(key[3]),
            lambda key: f"{exchange_label(key)}, a block",  # the loop's time / its blocks
            COPY_DEVICE,
        )
        if slowest_d2h is not None:
            lines.append(_named(data, name, "d2h_ms", slowest_d2h))
    return lines


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
        f"({device}): are these microseconds (values 1000x too large)? The column is read "
        "in ms and no unit is converted (docs/traces.md): if so, give the values in ms and "
        "fit again"
    )


def _named(data: TraceData, name: str, column: str, problem: str) -> str:
    """``problem`` with the trace file ``name`` of ``data`` and its ``column``, as an error
    names them."""
    path = next((p for p in data.files if p.name == name), Path(data.folder) / name)
    return f"{path}: field '{column}': {problem}"
