"""The cost structure of each strategy: FLOPs and exchanged rows (pure functions)."""

from __future__ import annotations

import csv

import pytest

from edgetwin.model_spec import MODEL_PRESETS, ModelSpec
from edgetwin.models.costs import block_flops
from edgetwin.models.layout import partition_sizes, segments_for_cr
from edgetwin.models.registry import cost_plan
from tests.conftest import REPO

VIT = ModelSpec(preset="vit_b16")


def mean_gflops_per_device(strategy: str, devices: int, segments: int | None = None) -> float:
    work = cost_plan(VIT, strategy, devices, segments)
    flops = [work.flops_per_sample(rank, VIT.blocks) for rank in range(devices)]
    return sum(flops) / len(flops) / 1e9


def test_flops_reproduce_published_model_costs() -> None:
    path = REPO / "data/reference/prism-jetson/model_costs.csv"
    with path.open() as handle:
        for row in csv.DictReader(handle):
            devices = int(row["devices"])
            segments = int(row["segments"]) if row["segments"] else None
            if segments is not None:
                assert segments == segments_for_cr(VIT.tokens, devices, float(row["cr"]))
            predicted = mean_gflops_per_device(row["strategy"], devices, segments)
            published = float(row["gflops_per_device"])
            assert predicted == pytest.approx(published, rel=0.01), row


def test_prism_with_segment_size_one_costs_exactly_voltage() -> None:
    for devices in (2, 3, 4, 8):
        largest = max(partition_sizes(VIT.tokens, devices))
        prism = cost_plan(VIT, "prism", devices, segments=largest)
        voltage = cost_plan(VIT, "voltage", devices)
        assert prism.block_steps == voltage.block_steps
        assert prism.exchange_before_block == voltage.exchange_before_block
        assert prism.kv_tokens == voltage.kv_tokens


def test_prism_exchanges_segments_and_attends_over_them() -> None:
    work = cost_plan(VIT, "prism", 4, segments=5)
    assert work.partition_tokens == (50, 49, 49, 49)
    assert work.exchange_before_block is not None
    assert work.exchange_before_block.rows_per_rank == (5, 5, 5, 5)
    assert work.kv_tokens == (65, 64, 64, 64)


def test_partitions_cover_every_token_once() -> None:
    for tokens in (1, 7, 197, 1024):
        for devices in range(1, 9):
            sizes = partition_sizes(tokens, devices)
            assert sum(sizes) == tokens
            assert max(sizes) - min(sizes) <= 1


def test_tensor_parallel_splits_single_block_flops() -> None:
    for devices in (2, 4):
        work = cost_plan(VIT, "tensor_parallel", devices)
        per_device = sum(step.flops_per_sample for step in work.block_steps[0])
        whole = block_flops(VIT, VIT.tokens, VIT.tokens)
        assert per_device * devices == pytest.approx(whole)
        assert work.weight_bytes_per_device < cost_plan(VIT, "single", 1).weight_bytes_per_device


@pytest.mark.parametrize("preset", sorted(MODEL_PRESETS))
@pytest.mark.parametrize("devices", [2, 3, 8])
def test_other_models_and_device_counts_need_no_new_code(preset: str, devices: int) -> None:
    model = ModelSpec(preset=preset)
    single = cost_plan(model, "single", 1).flops_per_sample(0, model.blocks)
    voltage = cost_plan(model, "voltage", devices)
    prism = cost_plan(model, "prism", devices, segments=4)
    voltage_flops = [voltage.flops_per_sample(r, model.blocks) for r in range(devices)]
    prism_flops = [prism.flops_per_sample(r, model.blocks) for r in range(devices)]
    assert max(voltage_flops) < single <= sum(voltage_flops)  # K/V over all tokens is redone
    assert 0 < max(prism_flops) < max(voltage_flops)  # attending over means is cheaper


def test_single_device_vit_b16_is_35_gflops() -> None:
    assert mean_gflops_per_device("single", 1) == pytest.approx(35.15, rel=0.01)
