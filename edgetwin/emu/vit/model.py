"""A ViT built from its architecture: pre-norm encoder blocks, CLS token, classifier head.

Parameter names follow timm's ``VisionTransformer`` (``patch_embed.proj``,
``blocks.i.attn.qkv``, ...), so a ViT-B/16 state_dict saved from timm loads
as is. Attention takes queries and keys/values from different rows, which is
what position-wise partitioning needs: Q from a rank's own rows, K/V from its
context (all rows for voltage; own rows plus received means for prism).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from edgetwin.emu.torch_weights import with_weights
from edgetwin.model_spec import ModelSpec

LAYER_NORM_EPS = 1e-6
INIT_STD = 0.02
IMAGE_SEED_OFFSET = 1_000_003  # images and weights come from different streams of one seed


def image_side(spec: ModelSpec) -> int:
    """Side of the square input image in pixels; the model must be a ViT (patch embedding)."""
    patches = spec.tokens - 1
    grid = math.isqrt(patches)
    if spec.patch_size < 1 or spec.channels < 1 or grid * grid != patches or grid == 0:
        raise ValueError(
            "a ViT needs patch_size >= 1, channels >= 1 and tokens = 1 + a square number "
            f"of patches (got tokens {spec.tokens}, patch_size {spec.patch_size}, "
            f"channels {spec.channels})"
        )
    return grid * spec.patch_size


class Attention(nn.Module):
    """Multi-head attention; one ``qkv`` projection sliced into Q and K/V."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, own: Tensor, context: Tensor, context_log_count: Tensor | None) -> Tensor:
        """Queries from ``own`` rows, keys/values from ``context`` rows.

        ``context_log_count`` [context rows] is added to every logit of a context row:
        log(k) for a row standing for k tokens (scaling-aware softmax), 0 for a real row.
        """
        width = own.shape[-1]
        q = F.linear(own, self.qkv.weight[:width], self.qkv.bias[:width])
        kv = F.linear(context, self.qkv.weight[width:], self.qkv.bias[width:])
        k, v = kv.chunk(2, dim=-1)
        mask = None if context_log_count is None else context_log_count.view(1, 1, 1, -1)
        attended = F.scaled_dot_product_attention(
            self._split_heads(q), self._split_heads(k), self._split_heads(v), attn_mask=mask
        )
        out: Tensor = self.proj(attended.transpose(1, 2).flatten(2))
        return out

    def _split_heads(self, rows: Tensor) -> Tensor:
        batch, count, width = rows.shape
        return rows.reshape(batch, count, self.heads, width // self.heads).transpose(1, 2)


class Mlp(nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, rows: Tensor) -> Tensor:
        out: Tensor = self.fc2(self.act(self.fc1(rows)))
        return out


class EncoderBlock(nn.Module):
    """Pre-norm block: x + attn(norm1 x), then + mlp(norm2 x)."""

    def __init__(self, width: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width, eps=LAYER_NORM_EPS)
        self.attn = Attention(width, heads)
        self.norm2 = nn.LayerNorm(width, eps=LAYER_NORM_EPS)
        self.mlp = Mlp(width, hidden)

    def attention_input(self, rows: Tensor) -> Tensor:
        """The normalised rows attention reads: what ranks exchange (or average and exchange)."""
        out: Tensor = self.norm1(rows)
        return out

    def finish(
        self,
        rows: Tensor,
        own_input: Tensor,
        context: Tensor,
        context_log_count: Tensor | None = None,
    ) -> Tensor:
        """The block's output for ``rows``, given their attention input and the context."""
        rows = rows + self.attn(own_input, context, context_log_count)
        out: Tensor = rows + self.mlp(self.norm2(rows))
        return out

    def forward(self, rows: Tensor) -> Tensor:
        normed = self.attention_input(rows)
        return self.finish(rows, normed, normed)


class PatchEmbed(nn.Module):
    """Non-overlapping patches to width-D rows (a strided convolution's weights)."""

    def __init__(self, channels: int, width: int, patch: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(channels, width, patch, stride=patch)


class ViT(nn.Module):
    """Patch embedding + CLS token + position embedding, encoder blocks, head on CLS."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        side = image_side(spec)
        width, patch = spec.width, spec.patch_size
        self.spec = spec
        self.image_side = side
        self.patch_embed = PatchEmbed(spec.channels, width, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, width))
        self.pos_embed = nn.Parameter(torch.zeros(1, spec.tokens, width))
        self.blocks = nn.ModuleList(
            EncoderBlock(width, spec.heads, spec.mlp_hidden) for _ in range(spec.blocks)
        )
        self.norm = nn.LayerNorm(width, eps=LAYER_NORM_EPS)
        self.head = nn.Linear(width, spec.classes)

    def encoder_blocks(self) -> list[EncoderBlock]:
        return [block for block in self.blocks if isinstance(block, EncoderBlock)]

    def embed_rows(self, images: Tensor, start: int, stop: int) -> Tensor:
        """Tokens ``start:stop`` of the embedded sequence (token 0 is CLS), [B, rows, D].

        The patch convolution is done as a matrix product over just the patches needed,
        so a rank that holds the image embeds only its own rows.
        """
        batch, patch = images.shape[0], self.spec.patch_size
        grid = self.image_side // patch
        patches = (
            images.reshape(batch, self.spec.channels, grid, patch, grid, patch)
            .permute(0, 2, 4, 1, 3, 5)
            .reshape(batch, grid * grid, -1)
        )
        proj = self.patch_embed.proj
        embedded = F.linear(
            patches[:, max(start, 1) - 1 : stop - 1], proj.weight.flatten(1), proj.bias
        )
        if start == 0:
            embedded = torch.cat([self.cls_token.expand(batch, -1, -1), embedded], dim=1)
        out: Tensor = embedded + self.pos_embed[:, start:stop]
        return out

    def classify(self, cls_rows: Tensor) -> Tensor:
        """Logits [B, classes] from the final CLS rows [B, D]."""
        out: Tensor = self.head(self.norm(cls_rows))
        return out

    def forward(self, images: Tensor) -> Tensor:
        rows = self.embed_rows(images, 0, self.spec.tokens)
        for block in self.encoder_blocks():
            rows = block(rows)
        return self.classify(rows[:, 0])


def build_vit(
    spec: ModelSpec,
    seed: int = 0,
    weights: Path | None = None,
    device: torch.device | str = "cpu",
) -> ViT:
    """An inference-mode ViT: seeded random weights, or a state_dict from ``weights``."""
    return with_weights(ViT(spec), _init_random, seed, weights, device)


def _init_random(model: ViT, seed: int) -> None:
    """timm's scheme from one generator: truncated normal weights, zero biases, unit norms."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.zero_()
            elif "norm" in name:
                param.fill_(1.0)
            else:
                nn.init.trunc_normal_(param, std=INIT_STD, generator=generator)


def make_images(spec: ModelSpec, batch: int, seed: int = 0) -> Tensor:
    """A seeded batch of standard-normal images [B, C, H, W] (the first k of B are batch k's)."""
    side = image_side(spec)
    generator = torch.Generator().manual_seed(seed + IMAGE_SEED_OFFSET)
    return torch.randn(batch, spec.channels, side, side, generator=generator)
