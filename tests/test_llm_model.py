"""The real decoder in one process: sizes from the published configs, the KV cache
against a full recompute, the exact combine of partial attentions, and run checks."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from edgetwin.decoder_spec import DECODER_PRESETS, DecoderSpec, parameter_count
from edgetwin.emu.llm.attention import attend, combine_partials, partial_attention
from edgetwin.emu.llm.generation import Generation, RankSetup, SingleRank
from edgetwin.emu.llm.model import Decoder, build_decoder, make_prompt
from edgetwin.emu.llm.runs import DECODER_STRATEGIES, DecoderRun
from edgetwin.emu.llm.strategies import RANKS
from edgetwin.emu.llm.tensor_parallel import shard_layer
from edgetwin.emu.llm.timing import GenerationClock
from edgetwin.emu.llm.worker import compare_generations
from edgetwin.models import registry
from edgetwin.models.decoder_costs import DecoderWorkload

LLAMA_KIND = DecoderSpec(
    layers=2, width=128, heads=4, kv_heads=2, ffn_size=256, ffn="swiglu", norm="rmsnorm",
    positions="rope", vocab=500, max_positions=64, bias="qkv", tied_embeddings=False,
)  # fmt: skip
GPT2_KIND = DecoderSpec(layers=2, width=128, heads=4, kv_heads=4, ffn_size=256, vocab=500,
                        max_positions=64)  # fmt: skip
CPU = torch.device("cpu")


@pytest.mark.parametrize("preset", sorted(DECODER_PRESETS))
def test_every_preset_built_in_torch_has_its_published_size(preset: str) -> None:
    spec = DecoderSpec(preset=preset)
    with torch.device("meta"):
        model = Decoder(spec)
    counted = sum(param.numel() for param in model.parameters())
    assert counted == parameter_count(spec)
    assert spec.published_params is not None
    assert abs(counted - spec.published_params) <= 0.01 * spec.published_params
    assert counted == spec.published_params  # the configs are the published ones: exact


def _numel(module: torch.nn.Module) -> int:
    return sum(param.numel() for param in module.parameters())


@pytest.mark.parametrize("ffn", ["gelu", "swiglu"])
@pytest.mark.parametrize("bias", ["all", "qkv", "none"])
def test_parameter_count_is_the_torch_module_s_for_every_kind(ffn: str, bias: str) -> None:
    spec = LLAMA_KIND.model_copy(update={"ffn": ffn, "bias": bias})
    with torch.device("meta"):
        assert _numel(Decoder(spec)) == parameter_count(spec)


@pytest.mark.parametrize("bias", ["all", "qkv", "none"])
def test_a_tensor_parallel_rank_holds_the_weights_the_twin_counts(bias: str) -> None:
    # 250 FFN columns on 4 ranks: 63, 63, 62, 62; norms, output and down biases whole
    spec = LLAMA_KIND.model_copy(update={"kv_heads": 4, "ffn_size": 250, "bias": bias})
    model = build_decoder(spec)
    plan = registry.decoder_plan("tensor_parallel", DecoderWorkload(spec, 4, 1, 8))
    replicated = _numel(model) - sum(_numel(layer) for layer in model.decoder_layers())
    for rank in range(4):
        shards = [shard_layer(spec, layer, rank, 4) for layer in model.decoder_layers()]
        whole_biases = sum(
            layer.self_attn.o_proj.bias.numel() + layer.mlp.down_proj.bias.numel()
            for layer in model.decoder_layers()
            if layer.mlp.down_proj.bias is not None and layer.self_attn.o_proj.bias is not None
        )
        held = sum(_numel(shard) for shard in shards) + whole_biases + replicated
        assert plan.weight_bytes[rank] == held * 4  # fp32


def generate(spec: DecoderSpec, batch: int, prompt_tokens: int, output_tokens: int):
    run = DecoderRun(spec, "single", 1, prompt_tokens, output_tokens, batch, seed=3)
    model = build_decoder(spec, seed=3)
    prompt = make_prompt(spec, batch, prompt_tokens, seed=3)
    with torch.inference_mode():
        made = SingleRank(RankSetup(run, model, 0, GenerationClock(CPU), None)).generate(prompt)
    return model, prompt, made


@pytest.mark.parametrize("spec", [LLAMA_KIND, GPT2_KIND], ids=["llama", "gpt2"])
def test_decoding_with_the_kv_cache_equals_a_full_recompute(spec: DecoderSpec) -> None:
    model, prompt, made = generate(spec, batch=2, prompt_tokens=10, output_tokens=5)
    assert made.tokens is not None and made.logits is not None
    assert made.tokens.shape == (2, 5) and made.logits.shape == (5, 2, spec.vocab)
    with torch.inference_mode():
        for step in range(5):
            # the whole sequence so far, from scratch: prompt plus the tokens before this one
            sequence = torch.cat([prompt, made.tokens[:, :step]], dim=1)
            recomputed = model(sequence)[:, -1]
            torch.testing.assert_close(made.logits[step], recomputed, atol=1e-5, rtol=1e-5)
            assert torch.equal(made.tokens[:, step], recomputed.argmax(-1))
    # not vacuous: the tokens depend on the context, not only on the last token
    assert len(set(made.tokens.flatten().tolist())) > 3


def test_a_generation_fills_the_learned_position_table_and_one_more_is_refused() -> None:
    """A generation feeds prompt + output - 1 positions (the last token is never fed back):
    61 + 4 fill GPT2_KIND's 64-row table (refused as 65 before); 62 + 4 are refused."""
    model, prompt, made = generate(GPT2_KIND, batch=1, prompt_tokens=61, output_tokens=4)
    assert made.tokens is not None and made.logits is not None
    fed = torch.cat([prompt, made.tokens[:, :3]], dim=1)
    assert fed.shape[1] == GPT2_KIND.max_positions
    with torch.inference_mode():
        torch.testing.assert_close(made.logits[3], model(fed)[:, -1], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="62 prompt and 4 output tokens feed 65 positions"):
        DecoderRun(GPT2_KIND, "single", 1, 62, 4)


def test_a_comparison_stops_at_the_first_different_token() -> None:
    """After a sequence's first different token both go on from other prefixes: its
    later tokens and logits are not compared (an equal token after it counted before)."""
    tokens = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    theirs = torch.tensor([[1, 2, 9, 4], [5, 6, 7, 8]])  # 0 differs at step 2, not at 3
    logits = torch.zeros(4, 2, 10)
    reference = Generation(theirs, logits.clone())
    logits[2, 0, 0] = 0.5  # the step that differs: the same prefix, compared
    logits[3, 0, 0] = 100.0  # after it: another prefix, not compared
    logits[3, 1, 0] = 0.25  # sequence 1 agrees throughout: every step compared
    max_diff, share = compare_generations(Generation(tokens, logits), reference)
    assert share == (2 + 4) / 8  # each sequence's tokens before its first difference
    assert max_diff == 0.5


def test_partial_attentions_over_shards_combine_to_the_whole() -> None:
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(2, 4, 1, 8, generator=generator) * 3
    keys, values = torch.randn(2, 2, 11, 8, generator=generator), torch.randn(2, 2, 11, 8)
    whole = attend(query, keys, values, None)
    cuts = [(0, 4), (4, 5), (5, 11)]  # unequal shards, one of a single key
    parts = torch.stack(
        [partial_attention(query, keys[:, :, a:b], values[:, :, a:b]) for a, b in cuts]
    )
    assert parts.shape == (3, 2, 4, 8 + 2)
    torch.testing.assert_close(combine_partials(parts), whole, atol=1e-6, rtol=1e-5)


def test_every_decoder_strategy_has_real_code() -> None:
    assert set(RANKS) == set(DECODER_STRATEGIES)


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"strategy": "pipeline", "layer_split": (1, 2)}, "layer_split [1, 2] must give"),
        ({"strategy": "tensor_parallel", "world": 4}, "kv_heads (2) divisible by 4"),
        ({"strategy": "voltage", "segments": 2}, "segments are for prism"),
        ({"strategy": "prism"}, "segments are for prism"),
        ({"strategy": "single"}, "single cannot run on 2 rank(s)"),
        ({"strategy": "voltage", "prompt_tokens": 60, "output_tokens": 8}, "feed 67 positions"),
        ({"strategy": "voltage", "prompt_tokens": 1}, "1 token cannot be split over 2"),
        ({"strategy": "beam"}, "unknown decoder strategy 'beam'"),
    ],
)
def test_a_run_that_cannot_be_done_is_refused(changes: dict, problem: str) -> None:
    fields = {"spec": LLAMA_KIND, "world": 2, "prompt_tokens": 16, **changes}
    with pytest.raises(ValueError) as error:
        DecoderRun(**fields)
    assert problem in str(error.value)


def test_a_state_dict_loads_and_one_of_another_model_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "weights.pt"
    torch.save(build_decoder(LLAMA_KIND, seed=7).state_dict(), path)
    loaded, seeded = build_decoder(LLAMA_KIND, weights=path), build_decoder(LLAMA_KIND, seed=7)
    theirs = seeded.state_dict()
    for name, mine in loaded.state_dict().items():
        assert torch.equal(mine, theirs[name]), name
    assert not torch.equal(
        loaded.embed_tokens.weight, build_decoder(LLAMA_KIND).embed_tokens.weight
    )
    with pytest.raises(ValueError, match="state_dict does not fit the model"):
        build_decoder(GPT2_KIND, weights=path)
