"""Each profile component's prediction of a trace group, built from the same cost code the
twin runs, and the bounds of its parameters:

- compute: encoder / whole-model latency vs batch and tokens -> the GPU time
  of ``ComputeParams.gpu_ms`` summed over the model's kernel groups;
- staging: the GPU->host and host->GPU phases of a staged exchange ->
  ``StagingParams.copy_ms`` of the piece sent and of the gathered tensor;
- network: the communication phase of a staged exchange, replayed on the twin's
  ``Channel`` (``exchange_replay``).
"""

from __future__ import annotations

from edgetwin.calibration.group_fit import Bounds, GroupKey, Predictor
from edgetwin.calibration.readers.gpu_bench import VIT_FULL
from edgetwin.calibration.trace_groups import COPY_PHASES
from edgetwin.model_spec import ModelSpec
from edgetwin.models.costs import block_flops, embed_flops
from edgetwin.profile import ComputeParams, StagingParams

MIN_STACK_MBPS = 10.0
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


def staging_predictor(phase: str, ranks: int = 2) -> Predictor:
    """d2h copies the piece a rank sends; h2d copies back the gathered tensor."""

    def predict(params: dict[str, float], key: GroupKey) -> float:
        _bw, _batch, _rows, piece_bytes, _blocks = key
        staging = StagingParams(**params)
        if phase == "d2h_ms":
            return staging.copy_ms(piece_bytes)
        return staging.gathered_ms(ranks * piece_bytes)

    return predict


def staging_groups_predictor() -> Predictor:
    """The copy of a ``staging_groups`` group: its phase's ``staging_predictor``."""
    by_phase = {phase: staging_predictor(phase) for phase in COPY_PHASES}
    return lambda params, key: by_phase[key[0]](params, key[1:])


def copy_predictor(params: dict[str, float], key: GroupKey) -> float:
    """One plain GPU<->host copy of ``key[1]`` bytes (either direction, one cost law)."""
    return StagingParams(**params).copy_ms(key[1])
