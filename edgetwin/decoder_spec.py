"""A decoder LLM: its architecture config by preset (``llama3_2_1b``, ``gpt2_small``, ...)
or by its dimensions, with the dtypes of its weights, KV cache and activations.

The presets are the published architecture configs (the models' ``config.json``);
``published_params`` is the parameter count the model's authors give, which the
tests check against the real torch module built from the same config. Everything
that needs a decoder's shape (the twin's cost model, the real decoder, the
scenario schema) reads it from here.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from edgetwin.number_text import counted, exact_text
from edgetwin.schema import PositiveInt, Strict, Tokens, with_preset

Dtype = Literal["fp32", "fp16", "int8", "int4"]
DTYPE_BYTES: dict[str, float] = {"fp32": 4.0, "fp16": 2.0, "int8": 1.0, "int4": 0.5}
Ffn = Literal["gelu", "swiglu"]  # GPT-2's two-matrix GELU MLP; Llama's gated three-matrix one
Norm = Literal["layernorm", "rmsnorm"]  # LayerNorm has a bias, RMSNorm a weight only
Positions = Literal["learned", "rope"]  # a learned position table, or rotary (no weights)
Bias = Literal["all", "qkv", "none"]  # which linear layers have biases (GPT-2, Qwen2, Llama)
# the twin builds a generation layer by layer and step by step: a million layers took
# minutes before anything was checked. Llama 3.1 405B, the deepest published, has 126.
MAX_LAYERS = 10_000

_FIELDS = (
    *("layers", "width", "heads", "kv_heads", "ffn_size", "ffn", "norm", "positions"),
    *("max_positions", "vocab", "tied_embeddings", "bias", "published_params"),
)
# fmt: off
_PRESET_VALUES: dict[str, tuple[Any, ...]] = {
    # openai-community/gpt2, gpt2-medium, gpt2-large: 124 M, 355 M, 774 M
    "gpt2_small": (12, 768, 12, 12, 3072, "gelu", "layernorm", "learned", 1024, 50257, True, "all", 124_439_808),  # noqa: E501
    "gpt2_medium": (24, 1024, 16, 16, 4096, "gelu", "layernorm", "learned", 1024, 50257, True, "all", 354_823_168),  # noqa: E501
    "gpt2_large": (36, 1280, 20, 20, 5120, "gelu", "layernorm", "learned", 1024, 50257, True, "all", 774_030_080),  # noqa: E501
    # meta-llama/Llama-3.2-1B and -3B: 1.24 B, 3.21 B (tied embeddings, GQA with 8 KV heads)
    "llama3_2_1b": (16, 2048, 32, 8, 8192, "swiglu", "rmsnorm", "rope", 131072, 128256, True, "none", 1_235_814_400),  # noqa: E501
    "llama3_2_3b": (28, 3072, 24, 8, 8192, "swiglu", "rmsnorm", "rope", 131072, 128256, True, "none", 3_212_749_824),  # noqa: E501
    # Qwen/Qwen2.5-0.5B: 0.49 B (biases on Q, K and V only)
    "qwen2_5_0_5b": (24, 896, 14, 2, 4864, "swiglu", "rmsnorm", "rope", 32768, 151936, True, "qkv", 494_032_768),  # noqa: E501
    # TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T: 1.1 B (untied LM head)
    "tinyllama_1_1b": (22, 2048, 32, 4, 5632, "swiglu", "rmsnorm", "rope", 2048, 32000, False, "none", 1_100_048_384),  # noqa: E501
}
# fmt: on
DECODER_PRESETS: dict[str, dict[str, Any]] = {
    name: dict(zip(_FIELDS, values, strict=True)) for name, values in _PRESET_VALUES.items()
}


class DecoderSpec(Strict):
    """A decoder-only Transformer: ``layers`` blocks of causal self-attention (``heads``
    query heads sharing ``kv_heads`` key/value heads) and an FFN of ``ffn_size``, a token
    embedding of ``vocab`` rows and an LM head (the embedding itself if tied)."""

    # Hugging Face config.json names (Llama's, GPT-2's) of these fields, for error hints
    KEY_HINTS: ClassVar[dict[str, str]] = {
        **dict.fromkeys(("num_hidden_layers", "n_layer"), "layers"),
        **dict.fromkeys(("hidden_size", "n_embd"), "width"),
        **dict.fromkeys(("num_attention_heads", "n_head"), "heads"),
        "num_key_value_heads": "kv_heads",
        **dict.fromkeys(("intermediate_size", "n_inner"), "ffn_size"),
        **dict.fromkeys(("max_position_embeddings", "n_positions", "n_ctx"), "max_positions"),
        "vocab_size": "vocab",
        "tie_word_embeddings": "tied_embeddings",
    }

    kind: Literal["decoder"] = "decoder"
    preset: str | None = None
    layers: Annotated[int, Field(gt=0, le=MAX_LAYERS)] = 12
    width: PositiveInt = 768
    heads: PositiveInt = 12
    kv_heads: PositiveInt = 12
    ffn_size: PositiveInt = 3072
    ffn: Ffn = "gelu"
    norm: Norm = "layernorm"
    positions: Positions = "learned"
    max_positions: Tokens = 1024
    vocab: PositiveInt = 50257
    tied_embeddings: bool = True
    bias: Bias = "all"
    published_params: PositiveInt | None = None  # the authors' figure, for presets
    weight_dtype: Dtype = "fp32"
    kv_dtype: Dtype = "fp32"
    activation_dtype: Literal["fp32", "fp16"] = "fp32"

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        """The preset's fields under those given; ``kv_heads`` left out is ``heads`` (one
        KV head per query head, as Hugging Face's configs default it)."""
        known = sorted(DECODER_PRESETS)
        data = with_preset(
            data, DECODER_PRESETS, lambda name: f"unknown decoder preset {name}; known: {known}"
        )
        if isinstance(data, dict) and "kv_heads" not in data and "heads" in data:
            data = {**data, "kv_heads": data["heads"]}
        return data

    @model_validator(mode="after")
    def _check_heads(self) -> DecoderSpec:
        """Heads of equal size, query heads in equal groups per KV head; each message
        starts with the field it is about (``schema.validation_error`` names it)."""
        if self.width % self.heads:
            raise ValueError(f"heads: width {self.width} is not divisible by {self.heads} heads")
        if self.heads % self.kv_heads:
            problem = f"{self.heads} heads are not divisible by {self.kv_heads} kv_heads"
            raise ValueError(f"kv_heads: {problem}")
        return self

    @property
    def head_dim(self) -> int:
        return self.width // self.heads

    @property
    def kv_width(self) -> int:
        """Width of one token's keys (and of its values): KV heads x head size."""
        return self.kv_heads * self.head_dim


def norm_params(model: DecoderSpec) -> int:
    """One norm's parameters: LayerNorm's weight and bias, RMSNorm's weight."""
    return (2 if model.norm == "layernorm" else 1) * model.width


def ffn_matrices(model: DecoderSpec) -> int:
    """SwiGLU's gate, up and down projections; GELU's up and down."""
    return 3 if model.ffn == "swiglu" else 2


def attention_params(model: DecoderSpec) -> int:
    """Q, K, V and output projections, their biases and the attention's norm."""
    d, kv = model.width, model.kv_width
    biases = (d + 2 * kv if model.bias in ("all", "qkv") else 0) + (d if model.bias == "all" else 0)
    return 2 * d * d + 2 * d * kv + biases + norm_params(model)


def ffn_params(model: DecoderSpec) -> int:
    """The FFN's matrices, their biases (each of F columns but the down projection's, of D)
    and its norm."""
    d, f, matrices = model.width, model.ffn_size, ffn_matrices(model)
    biases = (matrices - 1) * f + d if model.bias == "all" else 0
    return matrices * d * f + biases + norm_params(model)


def layer_params(model: DecoderSpec) -> int:
    """Parameters of one decoder block: attention and FFN, with their norms and biases."""
    return attention_params(model) + ffn_params(model)


def embedding_params(model: DecoderSpec) -> int:
    """Token embedding, position table (learned positions only), final norm, untied head."""
    positions = model.max_positions * model.width if model.positions == "learned" else 0
    head = 0 if model.tied_embeddings else model.vocab * model.width
    return model.vocab * model.width + positions + norm_params(model) + head


def parameter_count(model: DecoderSpec) -> int:
    """Every parameter of the model, counted from its config."""
    return model.layers * layer_params(model) + embedding_params(model)


def kept_positions(prompt_tokens: int, output_tokens: int) -> int:
    """Positions a generation feeds through the model, whose keys and values it keeps at
    its peak: the prompt and every output token but the last, which is never fed back."""
    return prompt_tokens + output_tokens - 1


def longest_prompt_tokens(max_positions: int, output_tokens: int) -> int:
    """The longest prompt whose generation of ``output_tokens`` fits ``max_positions``."""
    return max_positions - kept_positions(0, output_tokens)


def positions_problem(model: DecoderSpec, prompt_tokens: int, output_tokens: int) -> str:
    """Why a generation does not fit the model's positions ('' when it does), its numbers
    as a reader reads them (``exact_text``: ``131,127 positions``)."""
    fed = kept_positions(prompt_tokens, output_tokens)
    if fed <= model.max_positions:
        return ""
    prompt, output, positions = (exact_text(n) for n in (prompt_tokens, output_tokens, fed))
    longest = longest_prompt_tokens(model.max_positions, output_tokens)
    most = counted(longest, "prompt token")
    return (
        f"{prompt} prompt and {output} output tokens feed {positions} positions (the last "
        f"output is never fed back): more than the model's {exact_text(model.max_positions)} "
        f"(at most {most})"
    )


def kv_bytes_per_token(model: DecoderSpec, layers: int | None = None) -> float:
    """KV-cache bytes one token adds over ``layers`` blocks (all of them by default)."""
    count = model.layers if layers is None else layers
    return 2 * count * model.kv_width * DTYPE_BYTES[model.kv_dtype]
