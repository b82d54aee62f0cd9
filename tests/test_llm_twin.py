"""Decoder LLMs in the twin: the cost plans' exchanges from the shapes (docs/llm.md),
memory-bound decode and compute-bound prefill, the KV cache against RAM, pipeline stages
balanced by speed, determinism, and the scenario errors of a decoder."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import simpy
import yaml

from edgetwin.cli import main
from edgetwin.configuration import decoder_plan, split_shortfall
from edgetwin.decoder_spec import (
    DecoderSpec,
    attention_params,
    ffn_params,
    kv_bytes_per_token,
    layer_params,
)
from edgetwin.models import registry
from edgetwin.models.decoder_costs import (
    ID_BYTES,
    DecoderWorkload,
    Transfer,
    Work,
)
from edgetwin.models.strategies.pipeline import balanced_layers, positions_held
from edgetwin.models.strategy import Strategy
from edgetwin.profile import MB, load_profile
from edgetwin.result_cells import read_results
from edgetwin.scenario import Scenario, load_scenario
from edgetwin.sim import decoder_run
from edgetwin.sim.device import Device
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.generation import Generation
from edgetwin.sim.network import Network
from edgetwin.sim.runner import decoder_memory_status, run_scenario, simulate
from edgetwin.sweep_points import Configuration, configurations
from edgetwin.unplayed_settings import unplayed_settings
from tests.conftest import REPO

SMOKE = REPO / "scenarios/llm_smoke.yaml"
# a small decoder with grouped-query attention: 4 layers, 8 query heads over 4 KV heads
MODEL = DecoderSpec(layers=4, width=256, heads=8, kv_heads=4, ffn_size=512, vocab=1000)
A = 4  # activation bytes (fp32)


def transfers(ops: tuple[Any, ...], rank: int) -> list[Transfer]:
    return [op for op in ops[rank] if isinstance(op, Transfer)]


def plan(name: str, devices: int, batch: int = 2, prompt: int = 10, **kw: Any) -> Any:
    return registry.decoder_plan(name, DecoderWorkload(MODEL, devices, batch, prompt, **kw))


# ------------------------------------------------------------ the contract's exchanges


def test_pipeline_sends_hidden_states_and_token_ids() -> None:
    work = plan("pipeline", 2, batch=3)
    prefill = transfers(work.prefill, 1)
    assert [(t.kind, t.shape, t.peers) for t in prefill] == [
        ("send", (3, 10, 256), (0, 1)),
        ("send", (3,), (1, 0)),
    ]
    assert prefill[0].piece_bytes[0] == 3 * 10 * 256 * A
    assert prefill[1].piece_bytes[1] == 3 * ID_BYTES
    step = transfers(work.decode(1), 0)  # m = min(B, P) = 2 micro-batches, of 2 and 1
    assert [(t.shape, t.peers) for t in step] == [
        ((2,), (1, 0)),
        ((2, 1, 256), (0, 1)),
        ((1,), (1, 0)),
        ((1, 1, 256), (0, 1)),
    ]
    assert work.kv_layers == (2, 2)


def test_tensor_parallel_all_reduces_twice_per_layer() -> None:
    work = plan("tensor_parallel", 2)
    for ops, rows in ((work.prefill, 10), (work.decode(3), 1)):
        reduces = transfers(ops, 0)
        assert len(reduces) == 2 * MODEL.layers
        assert {(t.kind, t.shape, t.piece_bytes) for t in reduces} == {
            ("allreduce", (2, rows, 256), (2 * rows * 256 * A,) * 2)
        }
    assert work.kv_width == (MODEL.kv_width // 2,) * 2


def test_voltage_gathers_rows_then_partial_attention() -> None:
    work = plan("voltage", 3, prompt=10)  # rows 4, 3, 3: padded to 4
    gathers = transfers(work.prefill, 1)
    assert len(gathers) == MODEL.layers + 1  # one per layer, then the token broadcast
    assert gathers[0].shape == (2, 4, 256) and gathers[0].piece_bytes == (2 * 4 * 256 * A,) * 3
    assert gathers[-1].kind == "broadcast" and gathers[-1].piece_bytes == (0, 0, 2 * ID_BYTES)
    partial = transfers(work.decode(0), 0)
    head_dim = MODEL.width // MODEL.heads
    assert {t.shape for t in partial} == {(2, MODEL.heads, head_dim + 2)}
    assert partial[0].piece_bytes == (2 * MODEL.heads * (head_dim + 2) * A,) * 3


def test_prism_gathers_segment_means_and_attends_causally() -> None:
    work = plan("prism", 2, prompt=12, segments=2)
    gather = transfers(work.prefill, 0)[0]
    assert gather.shape == (2, 2, 256)
    first, second = (sum(op.flops for op in ops if isinstance(op, Work)) for ops in work.prefill)
    voltage = plan("voltage", 2, prompt=12)
    v_first, _ = (sum(op.flops for op in ops if isinstance(op, Work)) for ops in voltage.prefill)
    assert first < second  # rank 0 sees no means (causal); rank 1 the means of rank 0
    assert first < v_first


def test_layer_pieces_add_up_to_the_layer() -> None:
    for model in (MODEL, DecoderSpec(preset="gpt2_small"), DecoderSpec(preset="qwen2_5_0_5b")):
        assert attention_params(model) + ffn_params(model) == layer_params(model)


def test_twin_bytes_sent_are_what_each_rank_contributes(tmp_path: Path) -> None:
    """docs/llm.md's convention: each rank's own piece of an all-gather or all-reduce, a
    send's or a broadcast's tensor at its root only (the ring forwarding P-1 pieces is
    not counted)."""
    overrides = ["workload.output_tokens=3", "devices.0.count=3", "sweeps.0.devices=[2,3]"]
    scenario = load_scenario(SMOKE, overrides)
    fleet = build_fleet(scenario, SMOKE)
    outcomes = list(run_scenario(scenario, fleet))
    for outcome in outcomes:
        config = outcome.config
        work = decoder_plan(scenario, config)
        expected = 0.0
        for ops in work.phases(3):
            for rank in range(config.devices):
                for op in transfers(ops, rank):
                    if rank != op.root and op.kind in ("send", "broadcast"):
                        assert op.piece_bytes[rank] == 0  # the receiver's side of it
                    expected += op.piece_bytes[rank]
        assert outcome.row.bytes_sent == round(expected), config
    by_config = {(o.config.strategy, o.config.devices, o.config.batch): o.row for o in outcomes}
    # every rank puts the whole [B, t, D] into each all-reduce: 3 ranks 3/2 of 2 ranks'
    # (the ring's wire bytes, 2 (P - 1) tensors, would double)
    two, three = by_config["tensor_parallel", 2, 2], by_config["tensor_parallel", 3, 2]
    assert three.bytes_sent * 2 == two.bytes_sent * 3


# ------------------------------------------------------------ memory against compute


def _jetson_decoder() -> tuple[DecoderSpec, Any]:
    model = DecoderSpec(preset="llama3_2_1b", weight_dtype="fp16", kv_dtype="fp16")
    return model, load_profile("jetson_orin_nano")


def test_decode_is_memory_bound_and_a_long_prefill_compute_bound() -> None:
    model, jetson = _jetson_decoder()
    work = registry.decoder_plan("single", DecoderWorkload(model, 1, 1, 2048))
    decode_layer = work.decode(0)[0][1]
    prefill_layer = work.prefill[0][1]
    for piece, memory_bound in ((decode_layer, True), (prefill_layer, False)):
        flop_ms = jetson.compute.flop_ms(piece.flops, piece.rows)
        assert jetson.memory is not None
        traffic_ms = jetson.memory.traffic_ms(piece.memory_bytes)
        assert (traffic_ms > flop_ms) == memory_bound


def _single_times(overrides: list[str]) -> tuple[float, float]:
    path = REPO / "scenarios/llm_jetson.yaml"
    scenario = load_scenario(path, ["strategies=[{name: single}]", *overrides])
    config = Configuration(
        strategy="single",
        devices=1,
        batch=1,
        bandwidth_mbps=400,
        prompt_tokens=2048,
        output_tokens=3,
    )
    row = simulate(scenario, build_fleet(scenario, path), config, 0).row
    assert row.ttft_ms is not None and row.tpot_ms is not None
    return row.ttft_ms, row.tpot_ms


def test_a_pipeline_s_first_decode_step_costs_what_the_later_ones_do() -> None:
    """Rank 0 receives decode step 0's token ids at the prefill's end and every later
    step's at that step's start; the host side of that receive is paid before the next
    work either way (it was dropped at the phase boundary, so step 0 was 24 % faster
    and the TPOT of a short generation too low)."""
    tpot_ms = []
    for output_tokens in (2, 4):
        overrides = ["strategies=[{name: pipeline}]", f"workload.output_tokens={output_tokens}"]
        scenario = load_scenario(SMOKE, overrides)
        config = Configuration(
            strategy="pipeline",
            devices=2,
            batch=1,
            bandwidth_mbps=400,
            prompt_tokens=64,
            output_tokens=output_tokens,
        )
        row = simulate(scenario, build_fleet(scenario, SMOKE), config, 0).row
        assert row.tpot_ms is not None
        tpot_ms.append(row.tpot_ms)
    assert tpot_ms[0] == pytest.approx(tpot_ms[1], rel=1e-3)


@pytest.mark.timeout(120)
def test_tpot_follows_memory_bandwidth_and_ttft_follows_flops(tmp_path: Path) -> None:
    profile = yaml.safe_load(
        (REPO / "edgetwin/calibration/profiles/jetson_orin_nano.yaml").read_text()
    )
    variants = {}
    for name, section, key in (
        ("slow_memory", "memory", "bandwidth_gbps"),
        ("slow_flops", "compute", "throughput_gflops"),
    ):
        changed = {**profile, section: {**profile[section], key: profile[section][key] / 2}}
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(changed))
        variants[name] = f"devices.0.profile={tmp_path / name}.yaml"
    ttft, tpot = _single_times([])
    ttft_mem, tpot_mem = _single_times([variants["slow_memory"]])
    ttft_flops, tpot_flops = _single_times([variants["slow_flops"]])
    assert tpot_mem > 1.3 * tpot and tpot_flops == pytest.approx(tpot, rel=0.02)
    assert ttft_flops > 1.8 * ttft and ttft_mem == pytest.approx(ttft, rel=0.02)


def test_a_scenario_memory_bandwidth_halves_the_decode_traffic_term(tmp_path: Path) -> None:
    """``devices.N.memory_bandwidth_gbps`` overrides the profile's: doubled, every decode
    piece (memory-bound at both rates) takes half its traffic time, so TPOT drops by
    half the traffic term and the launch floors stay; TTFT (compute-bound) barely moves."""
    path = REPO / "scenarios/llm_jetson.yaml"
    scenario = load_scenario(path)
    jetson = build_fleet(scenario, path)[0].profile
    assert jetson.memory is not None
    doubled = 2 * jetson.memory.bandwidth_gbps
    work = registry.decoder_plan("single", DecoderWorkload(scenario.model, 1, 1, 2048))
    pieces = [op for s in (0, 1) for op in work.decode(s)[0] if isinstance(op, Work)]
    for piece in pieces:
        half_traffic_ms = jetson.memory.traffic_ms(piece.memory_bytes) / 2
        assert half_traffic_ms > jetson.compute.flop_ms(piece.flops, piece.rows)
    traffic_ms = sum(jetson.memory.traffic_ms(p.memory_bytes) for p in pieces) / 2  # per step
    ttft, tpot = _single_times([])
    ttft_fast, tpot_fast = _single_times([f"devices.0.memory_bandwidth_gbps={doubled}"])
    assert tpot - tpot_fast == pytest.approx(traffic_ms / 2, rel=1e-6)
    assert ttft_fast < ttft and ttft_fast == pytest.approx(ttft, rel=0.01)
    out = tmp_path / "out"
    over = ["devices.0.memory_bandwidth_gbps=123", "strategies=[{name: single}]"]
    args = [a for item in over for a in ("--set", item)]
    assert main(["run", str(SMOKE), *args, "--out", str(out), "--quiet"]) == 0
    resolved = yaml.safe_load((out / "scenario.resolved.yaml").read_text())
    assert resolved["devices"][0]["memory_bandwidth_gbps"] == 123


def test_a_memory_bandwidth_override_supplies_a_profile_s_missing_memory_section(
    tmp_path: Path,
) -> None:
    """A profile without ``memory`` is refused for a decoder, unless the scenario gives
    the bandwidth: the one value the section needs, so the run is the one the profile
    with that bandwidth gives."""
    profile = yaml.safe_load(
        (REPO / "edgetwin/calibration/profiles/jetson_orin_nano.yaml").read_text()
    )
    del profile["memory"]
    (tmp_path / "board.yaml").write_text(yaml.safe_dump(profile))
    ttft, tpot = _single_times(["devices.0.memory_bandwidth_gbps=50"])
    board = f"devices.0.profile={tmp_path / 'board.yaml'}"
    assert _single_times([board, "devices.0.memory_bandwidth_gbps=50"]) == (ttft, tpot)


def test_device_overrides_are_a_warning_where_the_hardware_is_real() -> None:
    overrides = ["devices.0.memory_bandwidth_gbps=100", "devices.0.ram_mb=4096"]
    scenario = load_scenario(SMOKE, overrides)
    real = "is set, but a real run's devices are its machine's: only the twin plays it"
    for mode in ("local", "emu"):
        assert unplayed_settings(scenario, mode) == [
            f"devices.0.ram_mb {real}, a {mode} run has the machine's RAM",
            f"devices.0.memory_bandwidth_gbps {real}, a {mode} run has the machine's memory "
            "bandwidth",
        ]
    assert unplayed_settings(scenario, "twin") == []


# ------------------------------------------------------------ the KV cache against RAM


def test_out_of_memory_at_the_token_a_decode_steps_activations_stop_fitting() -> None:
    """The real code allocates the whole KV cache (prompt + output - 1 positions) before the
    prefill, so a decode step stops fitting only as its activations grow with the context:
    the keys and values repeated to the 32 query heads. RAM for the weights, the whole
    cache and the step at 6000 positions, not 6001 (a 16-token prompt's prefill needs far
    less). The twin let the cache grow with the positions: it stopped at token 6093."""
    model, _ = _jetson_decoder()
    path = REPO / "scenarios/llm_jetson.yaml"
    weights = 2 * 1_235_814_400
    batch, prompt, output, fits = 4, 16, 6100, 6000
    cache = kv_bytes_per_token(model) * batch * (prompt + output - 1)
    # a decode step at position K: the keys and values repeated to the query heads (K x D
    # each, fp16) and 5 rows of D (docs/llm.md's Memory)
    width, a = model.width, 2
    step = a * batch * (5 * width + 2 * (fits + 0.5) * width)
    ram_mb = (weights + cache + step) / MB
    scenario = load_scenario(path, [f"devices.0.ram_mb={ram_mb}", "strategies=[{name: single}]"])
    config = Configuration(
        strategy="single",
        devices=1,
        batch=batch,
        bandwidth_mbps=400,
        prompt_tokens=prompt,
        output_tokens=output,
    )
    row = simulate(scenario, build_fleet(scenario, path), config, 0).row
    assert row.status == f"out of memory on jetson-0 at token {fits + 1}"
    assert math.isnan(row.total_ms) and row.ttft_ms is None
    fitting = config.model_copy(update={"output_tokens": fits - prompt + 1})  # keeps 6000
    assert simulate(scenario, build_fleet(scenario, path), fitting, 0).row.status == "ok"


def test_position_wise_and_pipeline_split_the_kv_cache() -> None:
    tokens = 10 + 7
    single = plan("single", 1).kv_bytes(0, tokens)
    for name in ("pipeline", "tensor_parallel", "voltage"):
        work = plan(name, 2)
        assert sum(work.kv_bytes(r, tokens) for r in range(2)) == pytest.approx(single), name


# ------------------------------------------------------------ pipeline stages


def test_balanced_layers_make_the_slowest_stage_fastest() -> None:
    assert balanced_layers(16, [1.0, 1.0, 1.0, 1.0]) == (4, 4, 4, 4)
    assert balanced_layers(12, [1.0, 2.0]) == (8, 4)  # twice as fast: twice the layers
    assert balanced_layers(3, [0.01, 1.0, 1.0]) == (1, 1, 1)
    with_head = balanced_layers(16, [1.0] * 4, [0.0, 0.0, 0.0, 3.0])
    times = [n + extra for n, extra in zip(with_head, [0, 0, 0, 3], strict=True)]
    assert sum(with_head) == 16 and max(times) == 5 and with_head[3] < min(with_head[:3])
    with pytest.raises(ValueError, match="cannot be split"):
        balanced_layers(2, [1.0, 1.0, 1.0])


def test_balanced_layers_stay_within_what_each_stage_holds() -> None:
    assert balanced_layers(12, [1.0, 2.0], most=[6, 12]) == (6, 6)
    assert balanced_layers(12, [1.0, 2.0], most=[12, 12]) == (8, 4)
    with pytest.raises(ValueError, match="do not fit"):
        balanced_layers(12, [1.0, 2.0], most=[5, 6])


@pytest.mark.timeout(60)
def test_the_twin_splits_a_pipeline_where_it_fits_if_a_split_does(tmp_path: Path) -> None:
    """Llama-3.2-3B in fp32 (12.9 GB) on two 8 GB boards, a 3000-token prompt: the stages
    balanced on time alone (15 + 13, the first also embedding) need more than the first
    board's RAM, so the run said out of memory though 14 + 14 fits both. (A 6000-token
    prompt did until 2026-12-07; its prefill's activations no longer fit either split.)"""
    raw = yaml.safe_load(SMOKE.read_text())
    raw["model"] = {"preset": "llama3_2_3b"}
    raw["workload"] = {"prompt_tokens": 3000, "output_tokens": 2}
    raw["strategies"] = [{"name": "pipeline"}]
    raw["sweeps"] = [{"batch": [1], "devices": [2]}]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    scenario = load_scenario(tmp_path / "s.yaml")
    fleet = build_fleet(scenario, tmp_path / "s.yaml")
    config = next(iter(configurations(scenario)))
    assert decoder_memory_status(scenario, fleet, config) == "ok"
    devices = [Device(simpy.Environment(), m.name, m.profile, m.ram_mb) for m in fleet]
    assert decoder_run.plan_for(scenario, config, devices).kv_layers == (14, 14)
    # no split holds the cache of 63,000 positions, which the real code allocates before
    # the prefill (until 2026-12-07 the twin grew it: the split stopped past token 3001);
    # the row runs the split that holds the most, and its status says that none holds
    # them all, and how many that one does (it said only "out of memory on jetson-0
    # (prefill)", as if the twin had found no split that fits where one might)
    longer = load_scenario(tmp_path / "s.yaml", ["workload.output_tokens=60000"])
    status = decoder_memory_status(longer, fleet, next(iter(configurations(longer))))
    assert status == (
        "out of memory on jetson-0 (prefill): no layer split holds its 62999 positions "
        "(prompt + output - 1); the most one holds, 3717, is the row's layer_split"
    )
    prefill = load_scenario(tmp_path / "s.yaml", ["workload.prompt_tokens=6000"])
    status = decoder_memory_status(prefill, fleet, next(iter(configurations(prefill))))
    assert status.startswith("out of memory on jetson-0 (prefill): no layer split holds its 6001")
    assert status.endswith("the most one holds, 3264, is the row's layer_split")
    free = [m.ram_mb * MB for m in fleet]
    model = prefill.model
    assert isinstance(model, DecoderSpec)
    assert positions_held(model, free, 1, 6000, 6001) == 3264
    assert split_shortfall(scenario, config, free) is None  # 3000 + 1 positions: one holds


@pytest.mark.timeout(120)
def test_a_rows_weights_and_kv_cache_are_one_devices(tmp_path: Path) -> None:
    """Llama-3.2-3B fp32 on four 8 GB boards, a 14,000-token prompt: the stages 6+8+8+6
    fit (the first and last also hold the 1.6 GB table), and the row gives the first
    board's weights and KV cache, the fullest device's. At a 75,830-token prompt (which
    until 2026-12-07's prefill activations fitted) the row gave the largest weights (the
    first board's, 3992 MB) and the largest KV cache (an 8-layer board's, 4971 MB), 8963
    MB together, above the RAM its own status said it fit, and the report's memory
    figure, which plots their sum, drew it over the RAM line."""
    raw = yaml.safe_load(SMOKE.read_text())
    raw["model"] = {"preset": "llama3_2_3b"}
    raw["workload"] = {"prompt_tokens": 14000, "output_tokens": 16}
    raw["strategies"] = [{"name": "pipeline"}]
    raw["sweeps"] = [{"batch": [1], "devices": [4]}]
    raw["devices"][0]["count"] = 4
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    assert main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    (row,) = read_results(tmp_path / "o" / "results.csv")
    assert row.status == "ok" and row.layer_split == "6+8+8+6"
    assert row.weights_mb is not None and row.kv_cache_mb is not None
    model = load_scenario(tmp_path / "s.yaml").model
    assert isinstance(model, DecoderSpec)
    first_kv = 6 * kv_bytes_per_token(model, 1) * (14000 + 15)  # 6 layers, T + O - 1
    assert row.kv_cache_mb == pytest.approx(first_kv / MB)
    assert row.weights_mb + row.kv_cache_mb <= load_profile("jetson_orin_nano").ram_mb


@pytest.mark.timeout(60)
def test_a_decoder_without_kv_heads_has_one_per_query_head() -> None:
    """Left out, ``kv_heads`` took GPT-2's 12 whatever the heads: 8 heads were refused
    for a key the file did not give, and 24 became grouped-query attention over 12, half
    the KV cache. A preset's KV heads stay its own."""
    own = ["~model.kv_heads", "model.width=768"]
    for heads in (8, 24):
        scenario = load_scenario(SMOKE, [*own, f"model.heads={heads}"])
        assert isinstance(scenario.model, DecoderSpec)
        assert scenario.model.kv_heads == heads
    llama = load_scenario(SMOKE, ["model={preset: llama3_2_1b, heads: 16}"]).model
    assert isinstance(llama, DecoderSpec)
    assert (llama.heads, llama.kv_heads) == (16, 8)


@pytest.mark.timeout(60)
def test_the_twin_gives_a_faster_board_more_layers(tmp_path: Path) -> None:
    profile = yaml.safe_load(
        (REPO / "edgetwin/calibration/profiles/jetson_orin_nano.yaml").read_text()
    )
    profile["memory"]["bandwidth_gbps"] *= 3
    profile["compute"]["launch_floor_ms"] /= 10
    (tmp_path / "fast.yaml").write_text(yaml.safe_dump(profile))
    raw = yaml.safe_load(SMOKE.read_text())
    raw["model"]["layers"] = 8
    raw["devices"] = [
        {"name": "slow", "profile": "jetson_orin_nano"},
        {"name": "fast", "profile": str(tmp_path / "fast.yaml")},
    ]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    scenario = load_scenario(tmp_path / "s.yaml")
    fleet = build_fleet(scenario, tmp_path / "s.yaml")
    config = next(c for c in configurations(scenario) if c.strategy == "pipeline")
    env = simpy.Environment()
    devices = [Device(env, m.name, m.profile, m.ram_mb) for m in fleet]
    work = decoder_run.plan_for(scenario, config, devices)
    assert work.kv_layers[1] > work.kv_layers[0]
    given = load_scenario(tmp_path / "s.yaml", ["strategies.1.layers=[6, 2]"])
    assert decoder_run.plan_for(given, config, devices).kv_layers == (6, 2)


@pytest.mark.timeout(60)
def test_micro_batches_keep_both_stages_busy_at_once() -> None:
    scenario = load_scenario(SMOKE, ["workload.output_tokens=6"])
    fleet = build_fleet(scenario, SMOKE)
    config = next(c for c in configurations(scenario) if c.strategy == "pipeline" and c.batch == 2)
    outcome = simulate(scenario, fleet, config, 0, record_intervals=True)
    busy = [
        [
            (i.start_ms, i.end_ms)
            for i in outcome.intervals
            if i.device == name and i.state == "compute"
        ]
        for name in ("jetson-0", "jetson-1")
    ]
    overlap = sum(max(0.0, min(a1, b1) - max(a0, b0)) for a0, a1 in busy[0] for b0, b1 in busy[1])
    assert overlap > 0
    one = simulate(scenario, fleet, config.model_copy(update={"batch": 1}), 0).row
    assert outcome.row.total_ms < 2 * one.total_ms


@pytest.mark.timeout(60)
def test_total_is_rank_0_holding_the_last_token_as_the_real_code_times_it() -> None:
    """A fast rank 0 holds the last token before a slow last rank has computed its own copy
    of it: the row ends at rank 0's token (the real code's ``token_ms``), not later."""
    fleet_yaml = (
        '[{"name": "fast", "profile": "h200_loopback", "count": 1},'
        ' {"name": "slow", "profile": "jetson_orin_nano", "count": 1}]'
    )
    scenario = load_scenario(SMOKE, [f"devices={fleet_yaml}", "workload.output_tokens=4"])
    fleet = build_fleet(scenario, SMOKE)
    config = next(c for c in configurations(scenario) if c.strategy == "voltage")
    outcome = simulate(scenario, fleet, config, 0, record_intervals=True)
    busy_until = {
        name: max(i.end_ms for i in outcome.intervals if i.device == name and i.state != "idle")
        for name in ("fast", "slow")
    }
    row = outcome.row
    assert busy_until["slow"] > busy_until["fast"]
    assert row.total_ms == pytest.approx(busy_until["fast"])
    assert row.tpot_ms == pytest.approx((row.total_ms - row.ttft_ms) / 3)


def _host_bound_prefill_ms(strategy: str, devices: int, per_mb: float) -> float:
    """Rank 0's prefill of llm_smoke (batch 2) on boards whose host side outlasts every
    piece of work (``sync_host_ms`` 1 s), paying ``per_mb`` ms per MB received."""
    sets = [f"devices.0.count={devices}", f"sweeps=[{{batch: [2], devices: [{devices}]}}]"]
    scenario = load_scenario(SMOKE, [*sets, "workload.output_tokens=2"])
    config = next(c for c in configurations(scenario) if c.strategy == strategy)
    env = simpy.Environment()
    boards = []
    for member in build_fleet(scenario, SMOKE)[:devices]:
        host = {"sync_host_ms": 1000.0, "sync_host_ms_per_mb": per_mb}
        compute = member.profile.compute.model_copy(update=host)
        profile = member.profile.model_copy(update={"compute": compute})
        boards.append(Device(env, member.name, profile, member.ram_mb))
    network = Network(env, scenario.network, 400, {d.name: d.profile.network for d in boards})
    run = Generation(env, decoder_run.plan_for(scenario, config, boards).phases(2), boards, network)
    env.run(env.all_of([env.process(run.rank_process(r)) for r in range(devices)]))
    return run.phase_end_ms[0][0]


@pytest.mark.parametrize("devices", [2, 3])
def test_a_tensor_parallel_rank_pays_the_host_side_of_what_its_all_reduces_bring(
    devices: int,
) -> None:
    """A ring all-reduce brings each rank 2 (P-1) / P of the tensor from its peers, which
    its host receives (and half of it sums): after each of the prefill's 2 L all-reduces
    of [B, T, D] the host side grows by sync_host_ms_per_mb x those MB, as after an
    all-gather by the pieces that arrive (it paid nothing: 'an all-reduce sums in place')."""
    model = load_scenario(SMOKE).model
    assert isinstance(model, DecoderSpec)
    tensor_mb = 2 * 64 * model.width * A / MB
    received_mb = 2 * (devices - 1) / devices * tensor_mb
    base = _host_bound_prefill_ms("tensor_parallel", devices, 0.0)
    charged = _host_bound_prefill_ms("tensor_parallel", devices, 10.0)
    assert charged - base == pytest.approx(2 * model.layers * 10.0 * received_mb, rel=1e-9)


# ------------------------------------------------------------ replay, determinism


def test_replayed_collectives_and_booked_ahead_phases_give_the_same_generation() -> None:
    """The two shortcuts of a long decode change no number: each collective run transfer
    by transfer and each phase waited for on its own give the same times and energy."""
    scenario = load_scenario(SMOKE, ["workload.output_tokens=4"])
    fleet = build_fleet(scenario, SMOKE)
    results = []
    for config in configurations(scenario):
        for shortcuts in (False, True):
            env = simpy.Environment()
            devices = [Device(env, m.name, m.profile, m.ram_mb) for m in fleet[: config.devices]]
            stacks = {d.name: d.profile.network for d in devices}
            network = Network(env, scenario.network, 400, stacks)
            work = decoder_run.plan_for(scenario, config, devices)
            run = Generation(
                env,
                work.phases(4),
                devices,
                network,
                replay_collectives=shortcuts,
                book_ahead=shortcuts,
            )
            env.run(env.all_of([env.process(run.rank_process(r)) for r in range(len(devices))]))
            for device in devices:
                device.close()
            energy = [joules for d in devices for joules in d.energy_j.values()]
            ends = [t for rank in run.phase_end_ms for t in rank]
            results.append((ends + energy, dict(network.bytes_sent)))
        (numbers, sent), (again, sent_again) = results[-2:]
        assert again == pytest.approx(numbers, rel=1e-9) and sent == sent_again, config


@pytest.mark.timeout(60)
def test_same_seed_same_results_and_another_seed_differs(tmp_path: Path) -> None:
    outs = []
    for seed in (1, 1, 2):
        out = tmp_path / f"run{len(outs)}"
        args = ["run", str(SMOKE), "--out", str(out), "--seed", str(seed), "--quiet"]
        assert main([*args, "--set", "noise_cv=0.1", "--set", "workload.output_tokens=4"]) == 0
        outs.append((out / "results.csv").read_bytes())
    assert outs[0] == outs[1] and outs[0] != outs[2]
    rows = read_results(tmp_path / "run0" / "results.csv")
    assert {r.strategy for r in rows} == set(registry.decoder_names())
    for row in rows:
        assert row.ttft_ms is not None and row.tpot_ms is not None and row.kv_cache_mb
        assert row.total_ms == pytest.approx(row.ttft_ms + 3 * row.tpot_ms, rel=1e-6)


DECODER_COLUMNS = (
    "prompt_tokens",
    "output_tokens",
    "ttft_ms",
    "tpot_ms",
    "total_ms",
    "tokens_per_s",
    "energy_per_token_j",
    "weights_mb",
    "kv_cache_mb",
    "compute_ms",
    "staging_ms",
    "comm_ms",
)


@pytest.mark.timeout(60)
def test_llm_jetson_writes_the_decoder_columns_for_every_strategy(tmp_path: Path) -> None:
    """Issue 14's acceptance: ``edgetwin run scenarios/llm_jetson.yaml`` writes the
    decoder columns for every strategy (here at prompt 128, 4 output tokens)."""
    out = tmp_path / "out"
    small = "sweeps=[{batch: [1, 2], devices: [2, 4], prompt_tokens: [128]}]"
    args = ["run", str(REPO / "scenarios/llm_jetson.yaml"), "--out", str(out), "--quiet"]
    assert main([*args, "--set", "workload.output_tokens=4", "--set", small]) == 0
    rows = read_results(out / "results.csv")
    assert {r.strategy for r in rows} == set(registry.decoder_names())
    for row in rows:
        assert row.status == "ok", row
        for column in DECODER_COLUMNS:
            value = getattr(row, column)
            assert value is not None and math.isfinite(value), (column, row)
        assert row.prompt_tokens == 128 and row.output_tokens == 4
        assert row.ttft_ms > 0 and row.tpot_ms > 0 and row.weights_mb > 0 and row.kv_cache_mb > 0
        assert row.energy_per_token_j == pytest.approx(row.energy_j / (row.batch * 4), rel=1e-5)


# ------------------------------------------------------------ scenario errors


def _decoder_raw(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(SMOKE.read_text())
    raw.update(changes)
    return raw


ERRORS = {
    "tp-heads": (
        _decoder_raw(
            model={"preset": "qwen2_5_0_5b"},
            sweeps=[{"devices": [4]}],
            devices=[{"name": "j", "profile": "jetson_orin_nano", "count": 4}],
        ),
        "field 'sweeps.0.devices': tensor_parallel on 4: heads 14 are not divisible by 4 devices",
    ),
    "encoder-only-strategy": (
        _decoder_raw(strategies=[{"name": "single"}, {"name": "encoder_only"}]),
        "field 'strategies.1.name': encoder_only runs no decoder (single, voltage, prism",
    ),
    "layers-sum": (
        _decoder_raw(strategies=[{"name": "pipeline", "layers": [3, 3]}]),
        "field 'strategies.0.layers': [3, 3] add up to 6; the model has 4",
    ),
    "layers-devices": (
        _decoder_raw(strategies=[{"name": "pipeline", "layers": [1, 1, 2]}]),
        "pipeline on 2: its layers [1, 1, 2] are not 2 sizes adding up to 4",
    ),
    "two-splits-of-one-strategy": (  # the second split never ran, without a word
        _decoder_raw(
            strategies=[{"name": "pipeline", "layers": [3, 1]}, {"name": "pipeline"}],
        ),
        "field 'strategies.1.layers': pipeline is listed as strategies.0 with other layers",
    ),
    "layers-on-voltage": (
        _decoder_raw(strategies=[{"name": "voltage", "layers": [2, 2]}]),
        "voltage takes no 'layers'",
    ),
    "too-long": (
        _decoder_raw(workload={"prompt_tokens": 1000, "output_tokens": 100}),
        "field 'workload.prompt_tokens': 1,000 prompt and 100 output tokens feed 1,099 positions",
    ),
    "one-position-too-long": (  # 1009 + 16 - 1 = 1024 runs
        _decoder_raw(sweeps=[{"devices": [2], "prompt_tokens": [8, 1010]}]),
        "field 'sweeps.0.prompt_tokens': 1,010 prompt and 16 output tokens feed 1,025 positions "
        "(the last output is never fed back): more than the model's 1,024 (at most 1,009",
    ),
    "more-stages-than-layers": (
        _decoder_raw(
            sweeps=[{"devices": [5]}],
            devices=[{"name": "j", "profile": "jetson_orin_nano", "count": 5}],
            strategies=[{"name": "pipeline"}],
        ),
        "pipeline on 5: 4 layers cannot be split over 5 devices",
    ),
    "more-ranks-than-prompt": (
        _decoder_raw(workload={"prompt_tokens": 1}, strategies=[{"name": "voltage"}]),
        "voltage on 2: 1 token cannot be split over 2 ranks",
    ),
    "local-fp16": (
        _decoder_raw(mode="local", model={**_decoder_raw()["model"], "weight_dtype": "fp16"}),
        "field 'model.weight_dtype': the real decoder runs fp32 (got fp16)",
    ),
    "local-rope-odd-head": (  # a model problem, named as 'strategies.0' before
        _decoder_raw(
            mode="local",
            model={**_decoder_raw()["model"], "positions": "rope", "width": 36},
        ),
        "field 'model.heads': rotary positions need an even head size (width / heads = 3)",
    ),
    "kv-heads": (  # named as 'model' before
        _decoder_raw(model={**_decoder_raw()["model"], "kv_heads": 5}),
        "field 'model.kv_heads': 12 heads are not divisible by 5 kv_heads",
    ),
    "width-heads": (
        _decoder_raw(model={**_decoder_raw()["model"], "heads": 7, "kv_heads": 7}),
        "field 'model.heads': width 768 is not divisible by 7 heads",
    ),
    "preset-kv-heads": (
        _decoder_raw(model={"preset": "llama3_2_1b", "kv_heads": 3}),
        "field 'model.kv_heads': 32 heads are not divisible by 3 kv_heads",
    ),
    "warm-up": (_decoder_raw(warmup_batches=1), "warm-up generations are not modelled"),
    "replicated-input": (  # prism_jetson.yaml's, kept where a user turns it decoder
        _decoder_raw(input_source="replicated"),
        "field 'input_source': an encoder's setting (a decoder's token ids are on every "
        "device already): leave the key out",
    ),
    "memory-bandwidth-zero": (
        _decoder_raw(
            devices=[{"name": "j", "profile": "jetson_orin_nano", "memory_bandwidth_gbps": 0}],
        ),
        "field 'devices.0.memory_bandwidth_gbps': should be greater than 0, not 0",
    ),
    "memory-bandwidth-text": (
        _decoder_raw(
            devices=[{"name": "j", "profile": "jetson_orin_nano", "memory_bandwidth_gbps": "x"}],
        ),
        "field 'devices.0.memory_bandwidth_gbps': should be a number",
    ),
    "workload-on-encoder": (
        {
            **yaml.safe_load((REPO / "scenarios/prism_jetson.yaml").read_text()),
            "workload": {"prompt_tokens": 3},
            "reference": None,
        },
        "are for decoder models",
    ),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", ERRORS, ids=list(ERRORS))
def test_bad_decoder_scenario_exits_2_with_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw, expected = ERRORS[case]
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(raw))
    voltage = registry.strategy("voltage")
    with registry.registered(Strategy("encoder_only", "E", cost_plan=voltage.cost_plan)):
        assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and str(path) in line and expected in line, line
    assert not (tmp_path / "out").exists()


def test_a_decoder_on_a_profile_without_memory_bandwidth_names_the_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = yaml.safe_load(
        (REPO / "edgetwin/calibration/profiles/jetson_orin_nano.yaml").read_text()
    )
    del profile["memory"]
    (tmp_path / "board.yaml").write_text(yaml.safe_dump(profile))
    raw = _decoder_raw(devices=[{"name": "j", "profile": "board.yaml", "count": 2}])
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    assert main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    line = capsys.readouterr().err.strip()
    # it named the profile by the name inside the file, a shipped one's: the file and
    # the key to add are named, and the command that fits one
    assert "field 'devices.0.profile': profile 'board.yaml' (jetson_orin_nano)" in line, line
    assert "has no memory.bandwidth_gbps" in line and "calibrate-machine" in line, line
    assert "set devices.0.memory_bandwidth_gbps" in line, line  # the scenario may give it


def test_a_decoder_preset_or_kind_selects_the_decoder() -> None:
    by_preset = Scenario.model_validate(_decoder_raw(model={"preset": "gpt2_small"}))
    assert isinstance(by_preset.model, DecoderSpec) and by_preset.model.layers == 12
    encoder = load_scenario(REPO / "scenarios/prism_jetson.yaml")
    assert encoder.encoder.tokens == 197
    assert all(c.prompt_tokens is None for c in configurations(encoder))


@pytest.mark.timeout(60)
def test_a_table_fit_refuses_a_decoder(  # the adaptive evaluation takes one: test_adaptive_llm
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "llm.yaml").write_text(SMOKE.read_text())
    reference = REPO / "data/reference/prism-jetson/measurements.csv"
    spec = f"profile: {{name: x, ram_mb: 8192}}\nreference: {reference}\nscenario: llm.yaml\n"
    (tmp_path / "spec.yaml").write_text(spec)
    for argv in (["calibrate", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "p.yaml")],):
        assert main(argv) == 2
        line = capsys.readouterr().err.strip()
        assert "field 'scenario': llm.yaml runs a decoder" in line, line


@pytest.mark.timeout(120)
def test_rows_say_the_layer_split_and_compare_warns_of_another(tmp_path: Path) -> None:
    """A row did not say which layers each device held: the twin balances an unsized
    pipeline on the profiles, a local run split it equally, and a comparison of the two
    mixed the split's difference into the error unsaid."""
    import edgetwin

    jetson = REPO / "scenarios/llm_jetson.yaml"
    layers = load_scenario(jetson).model.layers
    # every configuration of the shipped sweep, 8 tokens generated (not 128): a split is
    # balanced at the prompt's context, before the first
    twin = edgetwin.run(jetson, overrides=["workload.output_tokens=8"], out=tmp_path / "twin")
    for row in twin.rows:
        if row.strategy == "pipeline":
            split = [int(n) for n in str(row.layer_split).split("+")]
            assert len(split) == row.devices and sum(split) == layers
        else:
            assert row.layer_split is None
    balanced = {r.layer_split for r in twin.rows if r.strategy == "pipeline" and r.devices == 2}
    assert balanced == {"9+7"}  # the first stage embeds, the last holds the LM head
    pinned = [
        "strategies=[{name: pipeline, layers: [8, 8]}]",
        "sweeps=[{batch: [1], devices: [2]}]",
    ]
    given = edgetwin.run(jetson, overrides=pinned)
    assert {r.layer_split for r in given.rows} == {"8+8"}
    table = tmp_path / "equal.csv"
    text = (tmp_path / "twin/results.csv").read_text()
    table.write_text(text.replace("9+7", "8+8"))  # another split (other profiles, say)
    warnings = edgetwin.compare(tmp_path / "twin", table).warnings
    assert any("layer splits" in w and "9+7 vs 8+8" in w for w in warnings), warnings
    assert not any(
        "layer splits" in w for w in edgetwin.compare(tmp_path / "twin", tmp_path / "twin").warnings
    )


@pytest.mark.timeout(120)
def test_prism_rows_equal_voltage_s_where_docs_llm_says() -> None:
    """Voltage and prism gave equal TPOT in every row, and equal TTFT at CR 1: by design
    (docs/llm.md, "Where voltage and prism rows agree"). Decode is voltage's in both; with
    segments of one token prism's exchange is voltage's and its last rank, which paces the
    prefill, attends over the same positions; its earlier ranks skip later rows' keys."""
    import edgetwin

    sets = [
        "workload.prompt_tokens=2048",
        "workload.output_tokens=4",
        "sweeps=[{batch: [1], devices: [2]}]",
        "strategies=[{name: voltage}, {name: prism, cr: [1, 4]}]",
    ]
    rows = edgetwin.run(REPO / "scenarios/llm_jetson.yaml", overrides=sets).rows
    voltage, prism_1, prism_4 = sorted(rows, key=lambda r: (r.strategy != "voltage", r.cr or 0))
    assert (prism_1.segments, prism_1.cr, prism_4.cr) == (1024, 1.0, 4.0)
    for prism in (prism_1, prism_4):
        assert prism.tpot_ms == pytest.approx(voltage.tpot_ms, rel=1e-12)  # (total - TTFT) / 3
        assert (prism.weights_mb, prism.kv_cache_mb) == (voltage.weights_mb, voltage.kv_cache_mb)
    assert prism_1.ttft_ms == voltage.ttft_ms and prism_1.total_ms == voltage.total_ms
    assert prism_1.bytes_sent == voltage.bytes_sent
    assert prism_1.energy_j is not None and voltage.energy_j is not None
    assert prism_1.energy_j < voltage.energy_j and prism_1.compute_ms < voltage.compute_ms
    assert prism_4.ttft_ms is not None and voltage.ttft_ms is not None
    assert prism_4.ttft_ms < voltage.ttft_ms and prism_4.bytes_sent < voltage.bytes_sent
