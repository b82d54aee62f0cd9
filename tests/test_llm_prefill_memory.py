"""A prefill's activations: the plan's count against the real decoder's peak memory, and
the twin's memory check and pipeline stages that count them (docs/llm.md's Memory)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from edgetwin.decoder_spec import (
    DTYPE_BYTES,
    DecoderSpec,
    kept_positions,
    kv_bytes_per_token,
    layer_params,
)
from edgetwin.emu.llm.local_rows import largest_cache_memory
from edgetwin.models import registry
from edgetwin.models.decoder_costs import DecoderWorkload
from edgetwin.models.strategies.pipeline import layers_that_fit
from edgetwin.profile import MB
from edgetwin.scenario import load_scenario
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.runner import decoder_memory_status
from edgetwin.sweep_points import Configuration
from tests.conftest import REPO

SWIGLU = DecoderSpec(
    layers=2, width=256, heads=8, kv_heads=2, ffn_size=2048, ffn="swiglu", norm="rmsnorm",
    positions="rope", vocab=500, max_positions=4096, bias="qkv", tied_embeddings=False,
)  # fmt: skip
GELU = DecoderSpec(layers=2, width=256, heads=8, kv_heads=8, ffn_size=2048, vocab=500,
                   max_positions=4096)  # fmt: skip
BATCH = 2
PROMPTS = (256, 512, 1024)

# In a fresh process (nothing else allocated), one thread, large blocks always mapped
# (so a freed tensor leaves the resident set): the peak resident bytes a prefill adds
# (VmHWM reset by clear_refs), less its KV cache. Each script below starts with it.
PREFILL_PEAK = """
import json, re, sys, torch
from edgetwin.decoder_spec import DecoderSpec
from edgetwin.emu.llm.generation import RankSetup
from edgetwin.emu.llm.model import build_decoder, make_prompt
from edgetwin.emu.llm.runs import DecoderRun
from edgetwin.emu.llm.timing import GenerationClock

def status(key):
    text = open("/proc/self/status").read()
    return int(re.search(key + r":\\s+(\\d+)", text).group(1)) * 1024

def prefill_peak(generator, prompt):
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    before = status("VmRSS")
    generator.generate(prompt)
    return status("VmHWM") - before - generator.kv_cache_bytes

torch.set_num_threads(1)
spec = DecoderSpec.model_validate_json(sys.argv[1])
"""

# One device, per prompt length.
MEASURE = (
    PREFILL_PEAK
    + """
from edgetwin.emu.llm.generation import SingleRank

batch, got = int(sys.argv[2]), []
with torch.inference_mode():
    model = build_decoder(spec, 1)
    for prompt_tokens in map(int, sys.argv[3:]):
        run = DecoderRun(spec, "single", 1, prompt_tokens, 1, batch)
        rank = SingleRank(RankSetup(run, model, 0, GenerationClock(torch.device("cpu")), None))
        rank.generate(make_prompt(spec, batch, 4))  # warm: kernels, thread pools
        got.append(prefill_peak(rank, make_prompt(spec, batch, prompt_tokens)))
print(json.dumps(got))
"""
)


# One rank of a two-rank run (GLOO over loopback), per prompt length.
MEASURE_RANK = (
    PREFILL_PEAK
    + """
import torch.distributed as dist
from edgetwin.emu.llm.exchange import Exchange
from edgetwin.emu.llm.strategies import rank_generator

strategy, rank, port, batch, got = sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), []
segments = 4 if strategy == "prism" else None
cpu = torch.device("cpu")
dist.init_process_group("gloo", f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
with torch.inference_mode():
    model = build_decoder(spec, 1)
    for prompt_tokens in map(int, sys.argv[6:]):
        run = DecoderRun(spec, strategy, 2, prompt_tokens, 1, batch, segments)
        clock = GenerationClock(cpu)
        generator = rank_generator(RankSetup(run, model, rank, clock, Exchange(clock, cpu)))
        prompt = make_prompt(spec, batch, prompt_tokens)
        generator.generate(prompt)  # warm: kernels, thread pools, the GLOO pairs
        dist.barrier()
        got.append(prefill_peak(generator, prompt))
        dist.barrier()
dist.destroy_process_group()
print(json.dumps(got))
"""
)


# One device, one generation of O output tokens: the peak resident bytes when its first
# token is held (the prefill's peak; the decode steps after it hold less), the KV cache
# the run allocates included.
MEASURE_FIRST_TOKEN = (
    PREFILL_PEAK
    + """
from edgetwin.emu.llm.generation import SingleRank

class FirstToken(GenerationClock):
    peak = None

    def token_held(self):
        if self.peak is None:
            self.peak = status("VmHWM")
        super().token_held()

batch, prompt_tokens, output_tokens = map(int, sys.argv[2:5])
cpu = torch.device("cpu")
with torch.inference_mode():
    model = build_decoder(spec, 1)
    warm = DecoderRun(spec, "single", 1, 4, 1, batch)
    SingleRank(RankSetup(warm, model, 0, GenerationClock(cpu), None)).generate(
        make_prompt(spec, batch, 4)
    )  # kernels, thread pools
    clock = FirstToken(cpu)
    run = DecoderRun(spec, "single", 1, prompt_tokens, output_tokens, batch)
    rank = SingleRank(RankSetup(run, model, 0, clock, None))
    prompt = make_prompt(spec, batch, prompt_tokens)
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    before = status("VmRSS")
    rank.generate(prompt)
print(json.dumps(clock.peak - before))
"""
)


def _measured(spec: DecoderSpec) -> list[float]:
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
    args = [spec.model_dump_json(), str(BATCH), *map(str, PROMPTS)]
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *args], env=env, capture_output=True, text=True, check=True
    )
    return [float(x) for x in json.loads(done.stdout.splitlines()[-1])]


def _predicted(spec: DecoderSpec, prompt_tokens: int) -> float:
    plan = registry.decoder_plan("single", DecoderWorkload(spec, 1, BATCH, prompt_tokens))
    return plan.transient_bytes(0)


def _measured_ranks(strategy: str) -> list[list[float]]:
    """Each rank's measurements of a two-rank run of ``SWIGLU``."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
    common = [SWIGLU.model_dump_json(), strategy]
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", MEASURE_RANK, *common, str(rank), str(port), str(BATCH)]
            + [str(t) for t in PROMPTS[1:]],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    outs = [rank.communicate(timeout=240)[0] for rank in ranks]
    assert all(rank.returncode == 0 for rank in ranks)
    return [[float(x) for x in json.loads(out.splitlines()[-1])] for out in outs]


@pytest.mark.timeout(300)
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc")
@pytest.mark.parametrize("strategy", ["tensor_parallel", "voltage", "prism"])
def test_each_ranks_prefill_peak_is_what_the_plan_counts(strategy: str) -> None:
    """Each rank's share: its heads and FFN columns, or its rows and their context."""
    measured = _measured_ranks(strategy)
    segments = 4 if strategy == "prism" else None
    for rank, got in enumerate(measured):
        predicted = [
            registry.decoder_plan(
                strategy, DecoderWorkload(SWIGLU, 2, BATCH, t, segments)
            ).transient_bytes(rank)
            for t in PROMPTS[1:]
        ]
        slope = (got[1] - got[0]) / (predicted[1] - predicted[0])
        assert 0.85 < slope < 1.15, (rank, got, predicted)
        for value, want in zip(got, predicted, strict=True):
            assert 0.85 < value / want < 1.15, (rank, got, predicted)


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc")
@pytest.mark.parametrize("spec", [SWIGLU, GELU], ids=["swiglu", "gelu"])
def test_a_prefills_peak_grows_with_the_prompt_as_the_plan_counts(spec: DecoderSpec) -> None:
    measured = _measured(spec)
    predicted = [_predicted(spec, t) for t in PROMPTS]
    # the FFN's B x T x F tensors dominate: several MB per doubling of T, far above noise
    assert measured[-1] - measured[0] > 0.5 * spec.ffn_size * BATCH * PROMPTS[-1] * 4
    for i in range(1, len(PROMPTS)):
        slope = (measured[i] - measured[i - 1]) / (predicted[i] - predicted[i - 1])
        assert 0.85 < slope < 1.15, (measured, predicted)
    for got, want in zip(measured, predicted, strict=True):
        assert 0.85 < got / want < 1.15, (measured, predicted)


@pytest.mark.timeout(300)
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc")
def test_a_prefill_holds_the_whole_kv_cache_that_the_real_code_allocates_before_it() -> None:
    """The real code allocates (and zeroes) the cache of all T + O - 1 positions before its
    prefill. A 256-token prompt and 1024 output tokens: a board with 15 % less free RAM
    than the real prefill's peak is out of memory in the twin's prefill, one with 15 %
    more holds the generation. The twin counted the cache of T positions, 1.7 times under
    the peak, and ran the first board."""
    batch, prompt, output = BATCH, 256, 1024
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
    args = [GELU.model_dump_json(), str(batch), str(prompt), str(output)]
    done = subprocess.run(
        [sys.executable, "-c", MEASURE_FIRST_TOKEN, *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    peak = float(json.loads(done.stdout.splitlines()[-1]))
    work = registry.decoder_plan("single", DecoderWorkload(GELU, 1, batch, prompt))
    assert peak > 1.3 * (work.transient_bytes(0) + work.kv_bytes(0, prompt))  # far above
    config = Configuration(
        strategy="single", devices=1, batch=batch, bandwidth_mbps=400, prompt_tokens=prompt,
        output_tokens=output,
    )  # fmt: skip
    path = REPO / "scenarios/llm_smoke.yaml"

    def status(free_bytes: float) -> str:
        ram_mb = (work.weight_bytes[0] + free_bytes) / MB
        sets = [f"model={GELU.model_dump_json(exclude_none=True)}", f"devices.0.ram_mb={ram_mb}"]
        board = load_scenario(path, [*sets, "strategies=[{name: single}]"])
        return decoder_memory_status(board, build_fleet(board, path), config)

    assert status(0.85 * peak) == "out of memory on jetson-0 (prefill)", peak
    assert status(1.15 * peak) == "ok", peak


def test_the_ffn_holds_three_rows_by_columns_tensors_at_once_with_swiglu_two_with_gelu() -> None:
    for spec, tensors in ((SWIGLU, 3), (GELU, 2)):  # silu(gate), up, product; up, gelu(up)
        wider = DecoderSpec(**{**spec.model_dump(), "ffn_size": 2 * spec.ffn_size})
        grown = _predicted(wider, 1024) - _predicted(spec, 1024)
        assert grown == tensors * BATCH * 1024 * spec.ffn_size * 4  # fp32


def test_the_twin_runs_out_of_memory_in_a_prefill_whose_activations_do_not_fit() -> None:
    """Llama-3.2-1B at batch 8, a 4096-token prompt: its weights and KV cache fit a board
    with room for the FFN's three [B, T, F] tensors, but not the rest of the layer's:
    it fits with twice that."""
    path = REPO / "scenarios/llm_jetson.yaml"
    config = Configuration(
        strategy="single", devices=1, batch=8, bandwidth_mbps=400, prompt_tokens=4096,
        output_tokens=2,
    )  # fmt: skip
    scenario = load_scenario(path, ["strategies=[{name: single}]"])
    model = scenario.model
    assert isinstance(model, DecoderSpec)
    work = registry.decoder_plan("single", DecoderWorkload(model, 1, 8, 4096))
    held = work.weight_bytes[0] + work.kv_bytes(0, kept_positions(4096, 2))
    ffn = 3 * 8 * 4096 * model.ffn_size * DTYPE_BYTES[model.activation_dtype]
    assert ffn < work.transient_bytes(0) < 2 * ffn  # the FFN's tensors, the hidden rows

    def status(ram_bytes: float) -> str:
        board = load_scenario(
            path, ["strategies=[{name: single}]", f"devices.0.ram_mb={ram_bytes / MB}"]
        )
        return decoder_memory_status(board, build_fleet(board, path), config)

    assert status(held + ffn) == "out of memory on jetson-0 (prefill)"
    assert status(held + 2 * ffn) == "ok"


def test_a_pipeline_stage_holds_its_layers_next_to_one_layers_activations() -> None:
    """Four layers over two stages: the first has room for its two layers, one more and a
    prefill's activations; the second for its two and the activations less half a layer:
    it holds one."""
    model = DecoderSpec(**{**SWIGLU.model_dump(), "layers": 4})
    batch, prompt, kept = 2, 1024, 1030
    work = registry.decoder_plan("pipeline", DecoderWorkload(model, 2, batch, prompt))
    peak = work.transient_bytes(0)
    assert peak == work.transient_bytes(1) > work.transient_bytes(0, kept - 1)
    layer = layer_params(model) * 4 + work.kv_bytes(0, kept) / 2  # fp32
    held = [work.weight_bytes[r] + work.kv_bytes(r, kept) for r in range(2)]
    free = [held[0] + peak + layer + 1, held[1] + peak - layer / 2]
    assert layers_that_fit(model, free, batch, prompt, kept) == (3, 1)


def test_a_local_runs_memory_check_counts_a_prefills_activations() -> None:
    """This machine's check before a local run counted the KV cache alone."""
    scenario = load_scenario(REPO / "scenarios/llm_smoke.yaml", ["workload.prompt_tokens=512"])
    model = scenario.model
    assert isinstance(model, DecoderSpec)
    memory = largest_cache_memory(scenario, model)
    work = registry.decoder_plan("single", DecoderWorkload(model, 1, 2, 512))
    cache = kv_bytes_per_token(model) * kept_positions(512, 16) * 2  # batch 2, allocated whole
    assert work.transient_bytes(0) > cache  # the FFN's [B, T, 4D] tensors
    assert memory.activation_bytes == cache + work.transient_bytes(0)
    assert memory.what == "its KV cache and a layer's activations"
