"""The longest context question (a decoder's): per candidate, batch and output length,
the longest prompt whose run finished, and what stopped it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from edgetwin.decoder_spec import DecoderSpec
from edgetwin.models.registry import CandidateKey
from edgetwin.plan.candidates import candidate_of
from edgetwin.results import ResultRow
from edgetwin.scenario import Scenario


def longest_context(rows: Sequence[ResultRow], scenario: Scenario) -> dict[str, Any]:
    """Per candidate, batch and output length: the longest prompt whose twin run finished
    (the search's rows: the longest that fits, and one token more, which ran out of memory),
    what stopped it (``positions``: the model's, else the out-of-memory status) and its
    row's memory and times."""
    model = scenario.model
    assert isinstance(model, DecoderSpec)
    searches: dict[tuple[CandidateKey, int, int | None], list[ResultRow]] = defaultdict(list)
    for row in rows:
        searches[(candidate_of(row, scenario), row.batch, row.output_tokens)].append(row)
    entries = []
    for (key, batch, output), found in searches.items():
        fits = [r for r in found if r.ok]
        failed = [r for r in found if not r.ok]
        longest = max(fits, key=lambda r: r.prompt_tokens or 0, default=None)
        entries.append(
            {
                "candidate": key.label,
                "strategy": key.strategy,
                "devices": key.devices,
                "batch": batch,
                "output_tokens": output,
                "longest_prompt_tokens": None if longest is None else longest.prompt_tokens,
                "stopped_by": failed[0].status if failed else "positions",
                "weights_mb": found[0].weights_mb,
                "kv_cache_mb": None if longest is None else longest.kv_cache_mb,
                "ttft_ms": None if longest is None else longest.ttft_ms,
                "tpot_ms": None if longest is None else longest.tpot_ms,
            }
        )
    return {"max_positions": model.max_positions, "candidates": entries}
