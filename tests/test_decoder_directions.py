"""Which way a decoder's twin rows move when one thing changes (docs/llm.md): a longer
prompt never gives a shorter TTFT or TPOT, a faster or quicker network never a slower
generation, and each strategy's KV cache is the contract's count by hand."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import pytest

import edgetwin
from edgetwin.models.layout import full_rows
from edgetwin.results import ResultRow
from tests.conftest import REPO

SMOKE = REPO / "scenarios/llm_smoke.yaml"
FOUR_BOARDS = "devices.0.count=4"


def rows(*overrides: str) -> tuple[ResultRow, ...]:
    found = edgetwin.run(SMOKE, overrides=[FOUR_BOARDS, *overrides]).rows
    assert found and all(row.status == "ok" for row in found)
    return found


def configuration(row: ResultRow, but: str = "") -> tuple[object, ...]:
    """What a row ran, ``but`` one of it left out."""
    return tuple(getattr(row, name) for name in CONFIGURATION if name != but)


CONFIGURATION = ("strategy", "devices", "batch", "bandwidth_mbps", "prompt_tokens")


def runs(found: Iterable[ResultRow], axis: str) -> dict[tuple[object, ...], list[ResultRow]]:
    """The rows of each configuration but ``axis``, in ``axis`` order."""
    keyed: dict[tuple[object, ...], list[ResultRow]] = {}
    for row in found:
        keyed.setdefault(configuration(row, but=axis), []).append(row)
    return {key: sorted(group, key=lambda r: getattr(r, axis)) for key, group in keyed.items()}


def cell(row: ResultRow, column: str) -> float:
    """A decoder row's figure (every one is there on a row that ran)."""
    value = getattr(row, column)
    assert value is not None, column
    return float(value)


def never_falls(values: list[float]) -> bool:
    return all(
        later >= earlier - 1e-12 * abs(earlier) for earlier, later in itertools.pairwise(values)
    )


@pytest.mark.timeout(120)
def test_a_longer_prompt_never_gives_a_shorter_ttft_tpot_or_total() -> None:
    """On every strategy, on 2 and 4 boards, at one sequence and at three (pipeline
    micro-batches): the prefill does more, and each decode step reads more KV."""
    sweep = "sweeps=[{prompt_tokens: [8, 32, 128, 400], batch: [1, 3], devices: [2, 4]}]"
    groups = runs(rows(sweep, "workload.output_tokens=4"), "prompt_tokens")
    assert len(groups) == 2 * 2 * 4 + 2  # single once per batch
    for key, group in groups.items():
        assert len(group) == 4, key
        for column in ("ttft_ms", "tpot_ms", "total_ms", "kv_cache_mb"):
            assert never_falls([cell(row, column) for row in group]), (key, column)
        assert cell(group[-1], "ttft_ms") > cell(group[0], "ttft_ms"), key


@pytest.mark.timeout(120)
def test_more_bandwidth_never_slows_a_generation_and_latency_never_speeds_it() -> None:
    """Single has no network: neither moves it. Every split exchanges something in both
    phases, so a message's latency costs it, and no bandwidth makes it slower."""
    sweep = "sweeps=[{bandwidth_mbps: [20, 200, 2000], batch: [1, 3], devices: [2, 4]}]"
    by_latency = {
        latency: rows(sweep, "workload.output_tokens=4", f"network.latency_ms={latency}")
        for latency in (0, 5)
    }
    for group in runs(by_latency[0], "bandwidth_mbps").values():
        for column in ("ttft_ms", "tpot_ms", "total_ms"):
            assert never_falls([-cell(row, column) for row in group]), column
    for quick, slow in zip(by_latency[0], by_latency[5], strict=True):
        assert configuration(quick) == configuration(slow)
        assert quick.bytes_sent == slow.bytes_sent
        if quick.strategy == "single":
            assert slow.total_ms == quick.total_ms
        else:
            for column in ("ttft_ms", "tpot_ms"):
                assert cell(slow, column) > cell(quick, column), (quick.strategy, column)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("kv_heads", "kv_dtype", "kv_bytes"), [(12, "fp32", 4), (4, "int8", 1)])
def test_each_rows_kv_cache_is_the_contracts_count_by_hand(
    kv_heads: int, kv_dtype: str, kv_bytes: float
) -> None:
    """2 x layers held x KV width held x positions kept x B x KV bytes, positions the
    prompt plus every generated token but the last: single all of it, tensor parallel a
    P-th of the KV heads, a pipeline stage its layers (the row's stage: the first here,
    which holds the most), a position-wise rank its prompt rows and every P-th generated
    token (rank 0: the most of them)."""
    sweep = "sweeps=[{prompt_tokens: [9, 40], batch: [1, 3], devices: [2, 4]}]"
    model = [f"model.kv_heads={kv_heads}", f"model.kv_dtype={kv_dtype}"]
    output_tokens = 6
    found = rows(sweep, *model, f"workload.output_tokens={output_tokens}")
    layers, head_size = 4, 768 // 12
    for row in found:
        per_position = 2 * kv_heads * head_size * row.batch * kv_bytes  # one layer's
        prompt = int(cell(row, "prompt_tokens"))
        kept = prompt + output_tokens - 1
        if row.strategy == "single":
            held = layers * per_position * kept
        elif row.strategy == "tensor_parallel":
            held = layers * per_position / row.devices * kept
        elif row.strategy == "pipeline":
            assert row.layer_split is not None
            first_stage = int(row.layer_split.split("+")[0])
            held = first_stage * per_position * kept
        else:
            prompt_rows = full_rows(prompt, row.devices).partition_rows[0]
            generated = len(range(0, output_tokens - 1, row.devices))  # steps 0, P, 2P...
            held = layers * per_position * (prompt_rows + generated)
        assert row.kv_cache_mb == pytest.approx(held / 1e6, rel=1e-12), (row.strategy, row.devices)
