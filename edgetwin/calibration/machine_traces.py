"""The real measurements behind ``edgetwin calibrate-machine``, each written as a trace of
docs/traces.md: the ViT's latency (whole model vs batch, encoder blocks vs tokens), a GLOO
staged exchange between two local processes over loopback, and real single-device decoder
generations (``emu.llm.launcher.run_decoder``); and the plans that say what to measure."""

from __future__ import annotations

import csv
import itertools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch.multiprocessing.spawn import spawn

from edgetwin.calibration.readers.decoder_latency import DECODER_LATENCY_COLUMNS
from edgetwin.calibration.readers.gpu_bench import ENCODER_TOKENS, VIT_FULL
from edgetwin.decoder_spec import DecoderSpec
from edgetwin.emu.llm.launcher import run_decoder
from edgetwin.emu.vit.exchange import HOST, GlooExchange
from edgetwin.emu.vit.launcher import LOOPBACK_ADDR, free_port
from edgetwin.emu.vit.model import build_vit, make_images
from edgetwin.emu.vit.phases import PhaseClock
from edgetwin.model_spec import ModelSpec
from edgetwin.models import registry
from edgetwin.models.layout import full_rows

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


def decoder_shapes(plan: DecoderMeasurement) -> list[tuple[int, int, int]]:
    """Layers, batch and prompt tokens of each launch of a round."""
    return list(itertools.product(plan.layers, plan.batches, plan.prompt_tokens))


def write_decoder_latency(
    path: Path, plan: DecoderMeasurement, on_launch: Callable[[str], None] = lambda _done: None
) -> None:
    """TTFT and TPOT of every timed generation of one rank running the whole decoder
    (``single``), with the launcher's threads (this process's cores); ``on_launch`` gets
    each launch's shape once it is done."""
    rows: list[tuple[object, ...]] = []
    shapes = decoder_shapes(plan)
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
