"""Profile the machine you are on: run the real code paths, write traces, fit a profile.

``edgetwin calibrate-machine --out DIR`` times the real ViT (whole model vs
batch, encoder blocks vs tokens) and a GLOO staged exchange between two
local processes over loopback, writes them in the trace formats of
docs/traces.md (``DIR/traces/vit_latency.csv``,
``DIR/traces/gloo_staged_allgather.csv``), writes the calibration spec
(``DIR/spec.yaml``) and fits ``DIR/profile.yaml`` from it with the same
``traces`` fitter as every shipped trace profile. It also times real single-device
decoder generations (``emu.llm.launcher.run_decoder``, two depths of one decoder,
several batches and prompt lengths: ``DIR/traces/decoder_latency.csv``), from which
the profile's memory bandwidth is fitted (``fit_decoder``). On a CPU there is no power
meter: the profile's powers are zero and its energies are not predictions. The
measurements themselves are in ``machine_traces``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from edgetwin.atomic import write_text_atomic
from edgetwin.calibration.machine_traces import (
    DecoderMeasurement,
    MeasurementPlan,
    decoder_shapes,
    write_decoder_latency,
    write_staged_exchange,
    write_vit_latency,
)
from edgetwin.calibration.profile_io import host_ram_mb, write_profile
from edgetwin.calibration.readers.decoder_latency import DECODER_LATENCY_FILE
from edgetwin.calibration.readers.gpu_bench import VIT_LATENCY_FILE
from edgetwin.calibration.readers.staged_exchange import LOOPBACK_FILE
from edgetwin.calibration.trace_profile import calibrate_from_traces
from edgetwin.decoder_spec import DecoderSpec
from edgetwin.model_spec import ModelSpec
from edgetwin.profile import POWER_STATES, DeviceProfile
from edgetwin.schema import dump_yaml

LARGE_KB = 128.0  # glibc's mmap threshold: a larger host buffer is mapped fresh
FULL = MeasurementPlan(
    ModelSpec(preset="vit_b16"),
    (1, 2, 4, 8),
    (99, 109, 197),
    (10, 98),
    10,
    2,
    DecoderMeasurement(
        DecoderSpec(preset="gpt2_small"), (2, 4), (1, 2, 4), (16, 32, 64), 8, 2, 1, rounds=3
    ),
)


QUICK = MeasurementPlan(
    ModelSpec(tokens=65, width=192, blocks=4, heads=3, patch_size=16, channels=3),
    (1, 2, 4),
    (33, 43, 65),
    # pieces of 3 KB to 768 KiB: each side of LARGE_KB, and without any one batch as many
    # exchange shapes as the staging and network fits have parameters (two rows left 4 for 5)
    (4, 32, 256),
    3,
    1,
    DecoderMeasurement(
        DecoderSpec(width=192, heads=3, kv_heads=3, ffn_size=768, vocab=4096, max_positions=64),
        (1, 2),
        (1, 2),
        (8,),
        4,
        2,
        1,
        rounds=2,  # a launch slowed by another process is outrun by the other round's
    ),
)


def calibration_steps(plan: MeasurementPlan) -> int:
    """How many times ``measure_and_fit`` calls its ``on_step``: the ViT latencies, the
    staged exchange, each decoder launch, the fit."""
    decoder = plan.decoder
    launches = 0 if decoder is None else decoder.rounds * len(decoder_shapes(decoder))
    return 3 + launches


def measure_and_fit(
    out_dir: Path,
    plan: MeasurementPlan,
    command: str,
    on_step: Callable[[str], None] = lambda _done: None,
) -> DeviceProfile:
    """Measure, write the traces and the spec, fit and write the profile; return it.
    ``on_step`` gets the name of each of the ``calibration_steps`` once it is done."""
    traces = out_dir / "traces"
    traces.mkdir(parents=True, exist_ok=True)
    write_vit_latency(traces / VIT_LATENCY_FILE, plan)
    on_step("ViT latencies")
    write_staged_exchange(traces / LOOPBACK_FILE, plan)
    on_step("staged exchange")
    if plan.decoder is not None:
        write_decoder_latency(traces / DECODER_LATENCY_FILE, plan.decoder, on_step)
    spec_path = out_dir / "spec.yaml"
    write_text_atomic(spec_path, dump_yaml(machine_spec(plan)))
    profile = calibrate_from_traces(spec_path, command)
    write_profile(profile, out_dir / "profile.yaml")
    on_step("fit")
    return profile


def machine_spec(plan: MeasurementPlan) -> dict[str, Any]:
    """A ``traces`` spec for this machine's traces (relative paths: the folder moves whole).
    A copy and a message above ``LARGE_KB`` pay their own extra, as in the shipped trace
    specs: without the size, the extras changed no prediction and kept their fits' start."""
    fixed: dict[str, float] = {"compute.sync_host_ms": 0.0, "compute.sync_host_ms_per_mb": 0.0}
    fixed |= {"staging.large_copy_kb": LARGE_KB, "network.large_message_kb": LARGE_KB}
    fixed |= {f"power.{state}_w": 0.0 for state in POWER_STATES}
    decoder = {}
    if plan.decoder is not None:
        decoder = {"decoder": plan.decoder.model.model_dump(exclude_defaults=True)}
    return {
        "kind": "traces",
        "profile": {
            "name": f"machine_{os.uname().nodename}",
            "description": f"{os.uname().machine} host, {os.cpu_count()} cores, torch "
            f"{torch.__version__}, GLOO over loopback; no power meter (powers are 0)",
            "ram_mb": host_ram_mb(),
        },
        "traces": "traces",
        "model": plan.model.model_dump(exclude={"preset"}),
        **decoder,
        "fit": ["compute", "staging", "network", *(["memory"] if decoder else [])],
        "fixed": fixed,
        "bootstrap": 10,
        "seed": 0,
    }
