"""Fit profile components from hardware traces, with bootstrap uncertainty.

Each component has its own data and its own prediction, built from the same
cost code the twin runs:

- compute: encoder / whole-model latency vs batch and tokens -> the GPU time
  of ``ComputeParams.gpu_ms`` summed over the model's kernel groups;
- staging: the GPU->host and host->GPU phases of a staged exchange ->
  ``StagingParams.copy_ms`` of the piece sent and of the gathered tensor;
- network: the communication phase of a staged exchange -> the twin's own
  ``Channel`` replaying the traced loop (the measured copies as gaps between
  messages), so a token bucket and the stack rate act as they do in a run.

Parameters are fitted by least squares on the log error of group means; the
uncertainty comes from a bootstrap over repetitions (reps resampled within
each group, the fit repeated). The parameter sets of the bootstrap are kept
so the twin can sample them for prediction intervals.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy
from scipy.optimize import least_squares
from threadpoolctl import threadpool_info

from edgetwin.calibration.fit_check import (
    BoundReached,
    bounds_reached,
    check_enough_points,
    resample_shares,
)
from edgetwin.calibration.readers.gpu_bench import VIT_FULL, StagingCopy, VitLatency
from edgetwin.calibration.readers.staged_exchange import StagedExchange
from edgetwin.comparison import relative_pct
from edgetwin.errors import counted
from edgetwin.model_spec import ModelSpec
from edgetwin.models.costs import block_flops, embed_flops
from edgetwin.profile import ComputeParams, NetworkParams, StagingParams
from edgetwin.sim.network import Channel

LOOPBACK_MBPS = 100_000.0  # nominal rate of an unshaped loopback/veth link: the stack limits
MIN_STACK_MBPS = 10.0

GroupKey = tuple[Any, ...]
# name -> (lower, upper, start)
Bounds = Mapping[str, tuple[float, float, float]]
COMPUTE_BOUNDS: Bounds = {
    "throughput_gflops": (10.0, 1e6, 20_000.0),
    "launch_floor_ms": (0.0, 20.0, 0.2),
    "rows_half_util": (0.0, 1e5, 50.0),
}
STAGING_BOUNDS: Bounds = {
    "fixed_ms": (0.0, 20.0, 0.02),
    "ms_per_mb": (1e-4, 100.0, 0.2),
    "size_exponent": (0.3, 1.2, 0.9),
    "gathered_factor": (1.0, 20.0, 2.0),
    "large_copy_ms": (0.0, 50.0, 0.05),
}
COPY_BOUNDS: Bounds = {
    name: STAGING_BOUNDS[name] for name in ("fixed_ms", "ms_per_mb", "size_exponent")
}
NETWORK_BOUNDS: Bounds = {
    "message_overhead_ms": (0.0, 20.0, 0.2),
    "stack_mbps": (MIN_STACK_MBPS, 1e6, 2_000.0),
    "loss_window_kb": (1.0, 1e6, 1_000.0),
    "loss_goodput": (0.05, 1.0, 0.8),
    "large_message_ms": (0.0, 50.0, 0.05),
}


@dataclass(frozen=True)
class ComponentFit:
    """Fitted parameters of one profile section, their bootstrap spread and residuals;
    ``at_bound``: the parameters a bound of the fit stopped (``fit_check.bounds_reached``);
    ``resamples_at_bound``: the share of the bootstrap's resamples a bound stopped, per
    parameter and side (``fit_check.resample_shares``)."""

    section: str
    params: dict[str, float]
    stderr: dict[str, float]
    samples: list[dict[str, float]]
    residuals: list[dict[str, Any]]
    at_bound: dict[str, BoundReached] = field(default_factory=dict)
    resamples_at_bound: dict[str, dict[str, float]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        errors = [abs(r["error_pct"]) for r in self.residuals]
        clipped = {"resamples_at_bound": self.resamples_at_bound} if self.resamples_at_bound else {}
        return {
            "params": self.params,
            "stderr": self.stderr,
            **clipped,
            "median_abs_error_pct": round(float(np.median(errors)), 2),
            "residuals": self.residuals,
        }


Predictor = Callable[[dict[str, float], GroupKey], float]
# a group's metric (the trace column it times) and point (what its rows measured)
Describe = Callable[[GroupKey], tuple[str, str]]
LATENCY_MS = "latency_ms"  # the column a compute or plain copy group times


class PredictionOverflow(ValueError):
    """A group's prediction overflows a float: a count or size of its traces is far out of
    any physical range (a batch of 1e300 was an OverflowError traceback of the fit; the
    readers now refuse a batch past ``MAX_BATCH`` and tokens past ``MAX_TOKENS`` first)."""

    def __init__(self, section: str, where: str) -> None:
        super().__init__(
            f"{section} at {where}: the prediction overflows a float; a value of the trace "
            "is far out of any physical range"
        )
        self.section = section


class NotPositiveTime(ValueError):
    """A group's measured time is 0 ms or less: a fit on log errors cannot use it."""

    def __init__(self, section: str, where: str) -> None:
        super().__init__(f"{section} at {where}: the measured time is 0 ms or less")
        self.section = section


def fit_groups(
    section: str,
    groups: Mapping[GroupKey, Sequence[float]],
    predict: Predictor,
    describe: Describe,
    bounds: Bounds,
    fixed: Mapping[str, float],
    bootstrap: int,
    rng: np.random.Generator,
    center: Callable[[np.ndarray], Any] = np.mean,
    point_of: Callable[[GroupKey], Hashable] = lambda key: key,
    on_solve: Callable[[], None] = lambda: None,
) -> ComponentFit:
    """Least squares on group means (or another ``center``: ``np.min`` for the fastest
    rep), then a bootstrap over the reps of each group; a residual names its group's metric
    and point (``describe``). ``NotPositiveTime`` when a group's center is not above 0,
    ``TooFewPoints`` when the groups are too few distinct points for the free parameters
    (``point_of``: the configuration measured that a group's key is one metric or phase
    of; by default the key itself). ``on_solve`` is called after each of the 1 +
    ``bootstrap`` solves (progress). The parameters at a bound after the fit are
    ``at_bound``, and the share of the resamples a bound stopped ``resamples_at_bound``."""
    names = [n for n in bounds if n not in fixed]
    keys = list(groups)
    check_enough_points(section, len({point_of(k) for k in keys}), names)

    def solve(means: Mapping[GroupKey, float]) -> dict[str, float]:
        def residuals(x: np.ndarray) -> list[float]:
            params = {**fixed, **dict(zip(names, map(float, x), strict=True))}
            return [
                math.log(max(_predicted(section, predict, describe, params, k), 1e-12) / means[k])
                for k in keys
            ]

        start = [bounds[n][2] for n in names]
        limits = ([bounds[n][0] for n in names], [bounds[n][1] for n in names])
        result = least_squares(
            residuals, start, bounds=limits, x_scale="jac", loss="soft_l1", f_scale=0.1
        )
        on_solve()
        return {**fixed, **{n: float(v) for n, v in zip(names, result.x, strict=True)}}

    means = {k: float(center(np.asarray(groups[k]))) for k in keys}
    for key, mean in means.items():
        if not mean > 0:
            raise NotPositiveTime(section, _where(describe, key))
    params = solve(means)
    limits = {n: bounds[n][:2] for n in names}
    samples, reached = [], []
    for _ in range(bootstrap):
        resampled = {
            k: float(center(rng.choice(np.asarray(groups[k]), len(groups[k])))) for k in keys
        }
        solved = solve(resampled)
        samples.append({n: round(v, 6) for n, v in solved.items()})
        reached.append(bounds_reached({n: solved[n] for n in names}, limits))
    stderr = {n: round(float(np.std([s[n] for s in samples])), 6) for n in names} if samples else {}
    residuals = []
    for k in keys:
        metric, point = describe(k)
        predicted = predict(params, k)
        residuals.append(
            {
                "point": point,
                "metric": metric,
                "measured": round(means[k], 4),
                "predicted": round(predicted, 4),
                "error_pct": round(relative_pct(predicted, means[k]), 2),
            }
        )
    rounded = {n: round(v, 6) for n, v in params.items()}
    at_bound = bounds_reached({n: params[n] for n in names}, limits)
    return ComponentFit(
        section, rounded, stderr, samples, residuals, at_bound, resample_shares(reached)
    )


def blas_kernel() -> str:
    """The BLAS kernels this process runs (OpenBLAS's core name, e.g. ``openblas
    SkylakeX``). A least-squares fit's last digits depend on them, and so does where it
    stops along a direction the traces leave flat (docs/calibration.md)."""
    kernels = {
        f"{lib['internal_api']} {lib.get('architecture') or 'unknown'}"
        for lib in threadpool_info()
        if lib["user_api"] == "blas"
    }
    return ", ".join(sorted(kernels)) or "unknown"


def _predicted(
    section: str, predict: Predictor, describe: Describe, params: dict[str, float], key: GroupKey
) -> float:
    """``predict(params, key)``; one that overflows a float is a ``PredictionOverflow``."""
    try:
        value = predict(params, key)
    except OverflowError:  # an int count past a float's range
        raise PredictionOverflow(section, _where(describe, key)) from None
    if math.isinf(value):
        raise PredictionOverflow(section, _where(describe, key))
    return value


def without_metric(key: GroupKey) -> GroupKey:
    """The configuration measured of a group whose key starts with the metric it times
    (``("d2h_ms", ...)``, ``("ttft_ms", ...)``): the rest of the key."""
    return key[1:]


def _where(describe: Describe, key: GroupKey) -> str:
    """A group in an error: ``vit_full, batch 8, 197 tokens (latency_ms)``."""
    metric, point = describe(key)
    return f"{point} ({metric})"


# ---------------------------------------------------------------- compute


def compute_groups(latencies: Sequence[VitLatency]) -> dict[GroupKey, list[float]]:
    """Latencies by (kernel, batch, tokens)."""
    groups: dict[GroupKey, list[float]] = defaultdict(list)
    for record in latencies:
        groups[(record.kernel, record.batch, record.tokens)].append(record.latency_ms)
    return dict(groups)


def compute_label(key: GroupKey) -> str:
    """A compute group as its ``vit_latency.csv`` rows say it: ``vit_full, batch 8, 197
    tokens``."""
    kernel, batch, tokens = key
    return f"{kernel}, batch {batch}, {counted(tokens, 'token')}"


def describe_compute(key: GroupKey) -> tuple[str, str]:
    """A compute group's metric and point (``Describe``)."""
    return LATENCY_MS, compute_label(key)


def compute_predictor(model: ModelSpec) -> Predictor:
    """Latency of ``vit_full`` (embed, blocks, head) or ``encoder_tokens`` (blocks only)."""

    def predict(params: dict[str, float], key: GroupKey) -> float:
        kind, batch, tokens = key
        compute = ComputeParams(**{"sync_host_ms": 0.0, "sync_host_ms_per_mb": 0.0, **params})
        block = compute.gpu_ms(batch * block_flops(model, tokens, tokens), batch * tokens)
        total = model.blocks * block
        if kind == VIT_FULL:
            total += compute.gpu_ms(batch * embed_flops(model), batch * (tokens - 1))
            total += compute.gpu_ms(batch * 2.0 * model.width * model.classes, batch)
        return float(total)

    return predict


# ---------------------------------------------------------------- staged exchange


def exchange_key(record: StagedExchange) -> GroupKey:
    """(bandwidth, batch, rows, bytes per rank, blocks) of an exchange; loopback at its
    nominal rate. The blocks are the loop its replay runs (a forward of each)."""
    bandwidth = record.bandwidth_mbps or LOOPBACK_MBPS
    return (bandwidth, record.batch, record.rows, record.bytes_per_rank, record.blocks)


def exchange_label(key: GroupKey) -> str:
    """An exchange group (``exchange_key``) as its trace rows say it: ``batch 8, 98 rows a
    rank (2408448 bytes), 200 Mbit/s``, or ``loopback`` for an unshaped link."""
    bandwidth_mbps, batch, rows, piece_bytes, _blocks = key  # one count a trace file
    link = "loopback" if bandwidth_mbps == LOOPBACK_MBPS else f"{bandwidth_mbps:g} Mbit/s"
    return f"batch {batch}, {counted(rows, 'row')} a rank ({piece_bytes} bytes), {link}"


def exchange_groups(exchanges: Sequence[StagedExchange], phase: str) -> dict[GroupKey, list[float]]:
    """Per-block ``phase`` time (d2h_ms, h2d_ms, comm_ms) by exchange key."""
    groups: dict[GroupKey, list[float]] = defaultdict(list)
    for record in exchanges:
        groups[exchange_key(record)].append(getattr(record, phase) / record.blocks)
    return dict(groups)


def staging_predictor(phase: str, ranks: int = 2) -> Predictor:
    """d2h copies the piece a rank sends; h2d copies back the gathered tensor."""

    def predict(params: dict[str, float], key: GroupKey) -> float:
        _bw, _batch, _rows, piece_bytes, _blocks = key
        staging = StagingParams(**params)
        if phase == "d2h_ms":
            return staging.copy_ms(piece_bytes)
        return staging.gathered_ms(ranks * piece_bytes)

    return predict


COPY_PHASES = ("d2h_ms", "h2d_ms")  # the two copies of a staged exchange


def staging_groups(exchanges: Sequence[StagedExchange]) -> dict[GroupKey, list[float]]:
    """Per-block copy times by (phase, *exchange key): every exchange's two copies."""
    return {
        (phase, *key): times
        for phase in COPY_PHASES
        for key, times in exchange_groups(exchanges, phase).items()
    }


def staging_groups_predictor() -> Predictor:
    """The copy of a ``staging_groups`` group: its phase's ``staging_predictor``."""
    by_phase = {phase: staging_predictor(phase) for phase in COPY_PHASES}
    return lambda params, key: by_phase[key[0]](params, key[1:])


def describe_staging(key: GroupKey) -> tuple[str, str]:
    """A ``staging_groups`` group's metric (its phase) and point (``Describe``)."""
    return key[0], exchange_label(key[1:])


def describe_comm(key: GroupKey) -> tuple[str, str]:
    """An exchange group's communication time and point (``Describe``)."""
    return "comm_ms", exchange_label(key)


def copy_groups(copies: Sequence[StagingCopy]) -> dict[GroupKey, list[float]]:
    """Plain copy latency by (direction, bytes)."""
    groups: dict[GroupKey, list[float]] = defaultdict(list)
    for copy in copies:
        groups[(copy.direction, copy.size_bytes)].append(copy.latency_ms)
    return dict(groups)


def copy_label(key: GroupKey) -> str:
    """A plain copy group as its ``staging_copy.csv`` rows say it: ``h2d, 245760 bytes``."""
    direction, size_bytes = key
    return f"{direction}, {size_bytes} bytes"


def describe_copy(key: GroupKey) -> tuple[str, str]:
    """A plain copy group's metric and point (``Describe``)."""
    return LATENCY_MS, copy_label(key)


def copy_predictor(params: dict[str, float], key: GroupKey) -> float:
    """One plain GPU<->host copy of ``key[1]`` bytes (either direction, one cost law)."""
    return StagingParams(**params).copy_ms(key[1])


# messages a replay runs before it looks for its steady state: a short loop costs little to
# replay whole, and a whole replay is exact to the clock's last bit, where a block repeated
# differs by its rounding, enough to move a flat direction of the network fit (docs/
# calibration.md, "A trace fit on another BLAS kernel"); two forwards of 12 blocks, every
# shipped trace's, replay whole
WHOLE_REPLAY_MESSAGES = 24


def network_predictor(gaps_ms: Mapping[GroupKey, float], burst_kb: float | None) -> Predictor:
    """Mean comm time per block of the traced loop (its group's blocks), replayed on the
    twin's Channel.

    Each block: the measured copies (a gap in which tokens refill), then a
    message of the piece's size. One warm-up forward runs first, as in the trace.
    Past ``WHOLE_REPLAY_MESSAGES``, a block that leaves the token bucket as it found it
    (the channel idle between messages) begins a steady state: every later block
    repeats it, so the replay stops there (10,000 blocks were 20,000 messages).
    """

    def predict(params: dict[str, float], key: GroupKey) -> float:
        bandwidth_mbps, _batch, _rows, piece_bytes, blocks = key
        stack = NetworkParams(**params)
        env = simpy.Environment()
        burst = None if burst_kb is None else burst_kb * 1024
        channel = Channel(env, bandwidth_mbps, burst_bytes=burst, stack_mbps=params["stack_mbps"])
        comm_ms: list[float] = []

        def loop() -> simpy.events.ProcessGenerator:
            for message in range(2 * blocks):
                bucket_bits = channel.bucket_bits
                yield env.timeout(gaps_ms[key])
                start = env.now
                yield env.timeout(stack.overhead_ms(piece_bytes))
                yield channel.send(
                    piece_bytes,
                    window_bytes=params["loss_window_kb"] * 1024,
                    loss_goodput=params["loss_goodput"],
                )
                comm_ms.append(env.now - start)
                if message >= WHOLE_REPLAY_MESSAGES and channel.bucket_bits == bucket_bits:
                    return

        env.process(loop())
        env.run()
        repeated = [comm_ms[-1]] * min(2 * blocks - len(comm_ms), blocks)  # the steady state's
        return float(np.mean(comm_ms[blocks:] + repeated))

    return predict


def exchange_gaps(exchanges: Sequence[StagedExchange]) -> dict[GroupKey, float]:
    """Mean copy time per block (d2h + h2d) of every exchange group."""
    d2h, h2d = (exchange_groups(exchanges, phase) for phase in COPY_PHASES)
    return {k: float(np.mean(d2h[k]) + np.mean(h2d[k])) for k in d2h}
