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
meter: the profile's powers are zero and its energies are not predictions.
"""

from __future__ import annotations

import csv
import itertools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.multiprocessing.spawn import spawn

from edgetwin.atomic import write_text_atomic
from edgetwin.calibration.profile_io import host_ram_mb, write_profile
from edgetwin.calibration.readers.decoder_latency import (
    DECODER_LATENCY_COLUMNS,
    DECODER_LATENCY_FILE,
)
from edgetwin.calibration.readers.gpu_bench import ENCODER_TOKENS, VIT_FULL, VIT_LATENCY_FILE
from edgetwin.calibration.readers.staged_exchange import LOOPBACK_FILE
from edgetwin.calibration.trace_profile import calibrate_from_traces
from edgetwin.decoder_spec import DecoderSpec
from edgetwin.emu.llm.launcher import run_decoder
from edgetwin.emu.vit.exchange import HOST, GlooExchange
from edgetwin.emu.vit.launcher import LOOPBACK_ADDR, free_port
from edgetwin.emu.vit.model import build_vit, make_images
from edgetwin.emu.vit.phases import PhaseClock
from edgetwin.model_spec import ModelSpec
from edgetwin.models import registry
from edgetwin.models.layout import full_rows
from edgetwin.profile import POWER_STATES, DeviceProfile
from edgetwin.schema import dump_yaml

BLOCKS = 12


@dataclass(frozen=True)
class DecoderMeasurement:
    """Real single-device generations: ``model`` cut to each of ``layers`` blocks, at every
    batch and prompt length, ``output_tokens`` each: ``rounds`` passes over every
    combination, one launch of ``reps`` timed generations per combination and pass (other
    load on the machine comes in stretches of seconds: a combination's repetitions are
    spread over the measurement, not run back to back)."""

    model: DecoderSpec
    layers: tuple[int, ...]
    batches: tuple[int, ...]
    prompt_tokens: tuple[int, ...]
    output_tokens: int
    reps: int
    warmup: int
    rounds: int = 1


@dataclass(frozen=True)
class MeasurementPlan:
    """What to measure: the model, batch sizes, token counts, exchanged rows, repetitions,
    and the decoder generations (None: not measured, no memory bandwidth fitted)."""

    model: ModelSpec
    batches: tuple[int, ...]
    token_counts: tuple[int, ...]
    exchange_rows: tuple[int, ...]
    reps: int
    warmup: int
    decoder: DecoderMeasurement | None = None


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
    (4, 32),
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
    launches = 0 if decoder is None else decoder.rounds * len(_decoder_shapes(decoder))
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
    """A ``traces`` spec for this machine's traces (relative paths: the folder moves whole)."""
    fixed: dict[str, float] = {"compute.sync_host_ms": 0.0, "compute.sync_host_ms_per_mb": 0.0}
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


def _timed_ms(fn: Callable[[], object], reps: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def write_vit_latency(path: Path, plan: MeasurementPlan) -> None:
    """Whole-model latency per batch, and the encoder blocks alone per batch and tokens."""
    model = build_vit(plan.model)
    width = plan.model.width
    rows: list[tuple[object, ...]] = []
    with torch.inference_mode():
        for batch in plan.batches:
            images = make_images(plan.model, batch)

            def whole(images: torch.Tensor = images) -> torch.Tensor:
                logits: torch.Tensor = model(images)
                return logits

            times = _timed_ms(whole, plan.reps, plan.warmup)
            rows += [
                (VIT_FULL, batch, plan.model.tokens, rep, round(ms, 4))
                for rep, ms in enumerate(times)
            ]
            for tokens in plan.token_counts:
                hidden = torch.randn(batch, tokens, width)

                def encoder(hidden: torch.Tensor = hidden) -> torch.Tensor:
                    for block in model.encoder_blocks():
                        hidden = block(hidden)
                    return hidden

                times = _timed_ms(encoder, plan.reps, plan.warmup)
                rows += [
                    (ENCODER_TOKENS, batch, tokens, rep, round(ms, 4))
                    for rep, ms in enumerate(times)
                ]
    _write_csv(path, ("kernel", "batch", "tokens", "rep", "latency_ms"), rows)


def _decoder_shapes(plan: DecoderMeasurement) -> list[tuple[int, int, int]]:
    """Layers, batch and prompt tokens of each launch of a round."""
    return list(itertools.product(plan.layers, plan.batches, plan.prompt_tokens))


def write_decoder_latency(
    path: Path, plan: DecoderMeasurement, on_launch: Callable[[str], None] = lambda _done: None
) -> None:
    """TTFT and TPOT of every timed generation of one rank running the whole decoder
    (``single``), with the launcher's threads (this process's cores); ``on_launch`` gets
    each launch's shape once it is done."""
    rows: list[tuple[object, ...]] = []
    shapes = _decoder_shapes(plan)
    for round_index, (layers, batch, prompt) in itertools.product(range(plan.rounds), shapes):
        model = plan.model.model_copy(update={"layers": layers})
        records = run_decoder(
            model,
            registry.baseline().name,
            1,
            prompt,
            plan.output_tokens,
            batch,
            warmup=plan.warmup,
            reps=plan.reps,
        )
        for index, timing in enumerate(records[0].reps):
            assert timing.tpot_ms is not None  # output_tokens >= 2
            shape = (layers, batch, prompt, plan.output_tokens, round_index * plan.reps + index)
            rows.append((*shape, round(timing.ttft_ms, 4), round(timing.tpot_ms, 4)))
        on_launch(f"decoder: {layers} layer{'s' * (layers != 1)}, batch {batch}, prompt {prompt}")
    _write_csv(path, DECODER_LATENCY_COLUMNS, rows)


def write_staged_exchange(path: Path, plan: MeasurementPlan) -> None:
    """Two local processes exchange [batch, rows, width] per block over GLOO, staged, with
    the real code's exchange (``GlooExchange``) on a two-partition layout."""
    port = free_port()
    spawn(_exchange_rank, args=(port, plan, str(path)), nprocs=2, join=True)  # type: ignore[no-untyped-call]


def _exchange_rank(rank: int, port: int, plan: MeasurementPlan, path: str) -> None:
    os.environ |= {"MASTER_ADDR": LOOPBACK_ADDR, "MASTER_PORT": str(port)}
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    rows: list[tuple[object, ...]] = []
    try:
        for batch in plan.batches:
            for exchanged in plan.exchange_rows:
                rows += _exchange_reps(rank, batch, exchanged, plan)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        columns = (
            "rank",
            "batch",
            "rows",
            "bytes_per_rank",
            "blocks",
            "rep",
            "d2h_ms",
            "comm_ms",
            "h2d_ms",
            "total_ms",
        )
        _write_csv(Path(path), columns, rows)


def _exchange_reps(
    rank: int, batch: int, rows: int, plan: MeasurementPlan
) -> list[tuple[object, ...]]:
    """Each rank holds ``rows`` rows and all-gathers them once per block, ``BLOCKS`` times."""
    clock = PhaseClock(HOST)
    exchange = GlooExchange(full_rows(2 * rows, 2), rank, clock)
    piece = torch.randn(batch, rows, plan.model.width)
    records: list[tuple[object, ...]] = []
    for rep in range(-plan.warmup, plan.reps):
        dist.barrier()
        sent = exchange.bytes_sent
        clock.start()
        for block in range(BLOCKS):
            exchange.gather_context(f"block{block}", piece, piece)
        timing = clock.stop()
        if rep >= 0:
            records.append(
                (
                    rank,
                    batch,
                    rows,
                    (exchange.bytes_sent - sent) // BLOCKS,
                    BLOCKS,
                    rep,
                    *(round(timing.phase_ms(p), 4) for p in ("stage_out", "comm", "stage_in")),
                    round(timing.total_ms, 4),
                )
            )
    return records


def _write_csv(path: Path, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)


def summary(profile: DeviceProfile) -> str:
    """One line per fitted section: its median error."""
    medians = profile.fit.get("median_abs_error_pct", {})
    return ", ".join(f"{name} {value:.1f} %" for name, value in medians.items()) or "no fit"
