"""DistilBERT in torch (random, seeded weights), cut into S stages and exported to ONNX.

Layout as in DistilBERT for sequence classification: embeddings (word + position,
LayerNorm), post-LN transformer blocks (attention, GELU feed-forward), and a head
(pre-classifier, ReLU, classifier) on the first token. With S >= 2 the blocks are
split evenly over the first S-1 stages (earlier stages take the remainder), stage
0 also embeds, and the last stage is the head alone; S = 1 is the whole model.

What crosses a boundary: between transformer stages the whole hidden state
[1, seq, D] float32 (the next block's attention needs every token); into the head
only the first token's hidden state [1, D] (all the head reads; the reference
deployment's [1, 768]). Stage 0 takes token ids [1, seq] int64; the last stage
produces logits [1, classes]. There is no padding mask: inputs are full-length.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from edgetwin.crowd_spec import DEFAULT_SCHEDULER
from edgetwin.emu.crowdio.records import Mode
from edgetwin.emu.crowdio.sdk import PipelineJob, StageSpec, normalise_stages, pipeline_job
from edgetwin.run_folders import local_folder

ONNX_OPSET = 17


@dataclass(frozen=True)
class DistilBertConfig:
    """Sizes of a DistilBERT; the defaults are the real one with a 128-token input."""

    vocab_size: int = 30522
    dim: int = 768
    heads: int = 12
    hidden_dim: int = 3072
    layers: int = 6
    seq_len: int = 128
    max_positions: int = 512
    classes: int = 2
    layer_norm_eps: float = 1e-12


FULL = DistilBertConfig()
TINY = DistilBertConfig(
    vocab_size=512, dim=32, heads=4, hidden_dim=64, layers=4, seq_len=16, max_positions=16
)


class Embeddings(nn.Module):
    """Word plus position embeddings, then LayerNorm: token ids -> hidden states."""

    def __init__(self, config: DistilBertConfig) -> None:
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.dim)
        self.position = nn.Embedding(config.max_positions, config.dim)
        self.norm = nn.LayerNorm(config.dim, eps=config.layer_norm_eps)
        self.register_buffer("positions", torch.arange(config.seq_len), persistent=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        hidden: torch.Tensor = self.norm(self.word(input_ids) + self.position(self.positions))
        return hidden


class Block(nn.Module):
    """Multi-head self-attention and feed-forward, each followed by add & LayerNorm."""

    def __init__(self, config: DistilBertConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.q, self.k, self.v, self.out = (nn.Linear(config.dim, config.dim) for _ in range(4))
        self.attention_norm = nn.LayerNorm(config.dim, eps=config.layer_norm_eps)
        self.ffn_in = nn.Linear(config.dim, config.hidden_dim)
        self.ffn_out = nn.Linear(config.hidden_dim, config.dim)
        self.output_norm = nn.LayerNorm(config.dim, eps=config.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape
        head_dim = dim // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch, tokens, self.heads, head_dim).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(head_dim), dim=-1)
        context = (weights @ v).transpose(1, 2).reshape(batch, tokens, dim)
        x = self.attention_norm(x + self.out(context))
        hidden: torch.Tensor = self.output_norm(
            x + self.ffn_out(nn.functional.gelu(self.ffn_in(x)))
        )
        return hidden


class Head(nn.Module):
    """The classifier on the first token's hidden state: pre-classifier, ReLU, classifier."""

    def __init__(self, config: DistilBertConfig) -> None:
        super().__init__()
        self.pre_classifier = nn.Linear(config.dim, config.dim)
        self.classifier = nn.Linear(config.dim, config.classes)

    def forward(self, first_token: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.classifier(torch.relu(self.pre_classifier(first_token)))
        return logits


class DistilBert(nn.Module):
    """The whole model: token ids [B, seq] -> logits [B, classes]."""

    def __init__(self, config: DistilBertConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.head = Head(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embeddings(input_ids)
        for block in self.blocks:
            x = block(x)
        logits: torch.Tensor = self.head(x[:, 0])
        return logits


class Stage(nn.Module):
    """A contiguous piece of a DistilBert (shares its weights)."""

    def __init__(self, model: DistilBert, layers: range, embed: bool, pool: bool, head: bool):
        super().__init__()
        self.embeddings = model.embeddings if embed else None
        self.blocks = nn.ModuleList(model.blocks[i] for i in layers)
        self.pool = pool
        self.head = model.head if head else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.embeddings is not None:
            x = self.embeddings(x)
        for block in self.blocks:
            x = block(x)
        if self.pool:
            x = x[:, 0]
        if self.head is not None:
            x = self.head(x)
        return x


def build_model(config: DistilBertConfig, seed: int) -> DistilBert:
    """A DistilBert with BERT's initialisation (normal, std 0.02), seeded; in eval mode."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = DistilBert(config)
        for module in model.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear):
                nn.init.zeros_(module.bias)
    return model.eval()


def stage_layers(layers: int, stages: int) -> list[range]:
    """Block indices of each stage (the head stage, if any, has none)."""
    if stages == 1:
        return [range(layers)]
    if not 2 <= stages <= layers + 1:
        raise ValueError(f"{layers} layers make 1 to {layers + 1} stages, not {stages}")
    parts, ranges, start = stages - 1, [], 0
    for k in range(parts):
        size = layers // parts + (1 if k < layers % parts else 0)
        ranges.append(range(start, start + size))
        start += size
    return [*ranges, range(0)]


def split_model(model: DistilBert, stages: int) -> list[Stage]:
    """The S stage modules of ``model``."""
    ranges = stage_layers(model.config.layers, stages)
    last_blocks = 0 if stages == 1 else stages - 2
    return [
        Stage(model, layers, embed=k == 0, pool=k == last_blocks, head=k == stages - 1)
        for k, layers in enumerate(ranges)
    ]


def stage_weight_bytes(config: DistilBertConfig, stages: int) -> list[int]:
    """Each stage's fp32 weights, counted on a model without storage (the meta device)
    and without initial values (initialising meta tensors imports torch._dynamo: a second
    or more, and torch's compile cache made in TMPDIR)."""
    with torch.device("meta"), _NoInitialValues():
        model = DistilBert(config)
    parts = split_model(model, stages)
    return [4 * sum(p.numel() for p in stage.parameters()) for stage in parts]


def export_stages(
    config: DistilBertConfig, stages: int, seed: int, work_root: Path | None = None
) -> list[StageSpec]:
    """The model's S stages as normalised ONNX stages ``cell_a``, ``cell_b``, ...; the
    exporter's temporary folders live under ``work_root`` (None: the system's)."""
    model = build_model(config, seed)
    example = torch.zeros(1, config.seq_len, dtype=torch.int64)
    blobs = []
    with torch.no_grad():
        for stage in split_model(model, stages):
            blobs.append(_to_onnx(stage, example, work_root))
            example = stage(example)
    return normalise_stages(blobs)


class _NoInitialValues(TorchFunctionMode):
    """``torch.nn.init`` functions leave their tensor as it is (it has only a shape)."""

    def __torch_function__(
        self,
        func: Callable[..., object],
        types: object,
        args: Sequence[object] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        kwargs = kwargs or {}
        if getattr(func, "__module__", None) == "torch.nn.init":
            return args[0] if args else kwargs["tensor"]
        return func(*args, **kwargs)


def make_inputs(config: DistilBertConfig, count: int, seed: int) -> list[np.ndarray]:
    """``count`` random token sequences [1, seq] int64, seeded."""
    rng = np.random.default_rng(seed)
    return [
        rng.integers(0, config.vocab_size, size=(1, config.seq_len), dtype=np.int64)
        for _ in range(count)
    ]


def reference_logits(
    config: DistilBertConfig, seed: int, inputs: Sequence[np.ndarray]
) -> np.ndarray:
    """Logits [N, classes] of the whole model in this process (the single-device reference)."""
    model = build_model(config, seed)
    with torch.no_grad():
        rows = [model(torch.from_numpy(array)).numpy()[0] for array in inputs]
    return np.stack(rows)


def distilbert_job(
    config: DistilBertConfig,
    *,
    inputs: int,
    stages: int,
    mode: Mode = "streaming",
    scheduler: str = DEFAULT_SCHEDULER,
    seed: int = 0,
) -> PipelineJob:
    """A job of ``inputs`` random sequences through a ``stages``-stage DistilBERT (one seed)."""
    return pipeline_job(
        export_stages(config, stages, seed),
        make_inputs(config, inputs, seed),
        mode=mode,
        scheduler=scheduler,
        seed=seed,
    )


def _to_onnx(stage: Stage, example: torch.Tensor, work_root: Path | None) -> bytes:
    input_name = "input_ids" if stage.embeddings is not None else "hidden_in"
    output_name = "logits" if stage.head is not None else "hidden_out"
    with local_folder("crowdio-export", work_root) as folder:
        path = Path(folder) / "stage.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript exporter is deprecated, and works
            torch.onnx.export(
                stage,
                (example,),
                path,
                input_names=[input_name],
                output_names=[output_name],
                opset_version=ONNX_OPSET,
                dynamo=False,
            )
        return path.read_bytes()
