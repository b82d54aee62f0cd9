"""Real single-device decoder generations: ``decoder_latency.csv``.

Each row is one timed greedy generation of the decoder of the spec's ``decoder`` cut
to ``layers`` blocks: ``batch`` sequences of ``prompt_tokens``, ``output_tokens``
generated; ``ttft_ms`` (prefill and the first token) and ``tpot_ms`` (mean time per
later token), as a results row reports them. Columns: layers, batch, prompt_tokens,
output_tokens, rep, ttft_ms, tpot_ms.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edgetwin.csv_rows import check_once, read_rows
from edgetwin.schema import MAX_BATCH

DECODER_LATENCY_FILE = "decoder_latency.csv"
DECODER_LATENCY_COLUMNS = (
    "layers",
    "batch",
    "prompt_tokens",
    "output_tokens",
    "rep",
    "ttft_ms",
    "tpot_ms",
)
DECODER_LATENCY_KEY = DECODER_LATENCY_COLUMNS[:5]  # one generation: a row of each


@dataclass(frozen=True)
class DecoderLatency:
    """One timed generation on one device."""

    layers: int
    batch: int
    prompt_tokens: int
    output_tokens: int
    rep: int
    ttft_ms: float
    tpot_ms: float


def read_decoder_latency(path: str | Path) -> list[DecoderLatency]:
    """Rows of a ``decoder_latency.csv`` (at least two output tokens: a TPOT), each
    generation (layers, batch, prompt_tokens, output_tokens, rep) once."""
    path = Path(path)
    rows = read_rows(path, DECODER_LATENCY_COLUMNS)
    records = [
        DecoderLatency(
            layers=row.integer("layers", minimum=1),
            batch=row.integer("batch", minimum=1, maximum=MAX_BATCH),
            prompt_tokens=row.integer("prompt_tokens", minimum=1),
            output_tokens=row.integer("output_tokens", minimum=2),
            rep=row.integer("rep", minimum=0),
            ttft_ms=row.positive("ttft_ms"),
            tpot_ms=row.positive("tpot_ms"),
        )
        for row in rows
    ]
    keys = [(r.layers, r.batch, r.prompt_tokens, r.output_tokens, r.rep) for r in records]
    check_once(rows, DECODER_LATENCY_KEY, keys)
    return records
