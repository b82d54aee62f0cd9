"""The model a scenario runs: a Transformer by preset (``vit_b16``, ``bert_base``, ...)
or by its dimensions. The scenario schema and the cost models both read it."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field, model_validator

from edgetwin.decoder_spec import DECODER_PRESETS
from edgetwin.schema import PositiveFloat, PositiveInt, Strict, Tokens, with_preset

_PRESET_FIELDS = ("tokens", "width", "blocks", "heads", "patch_size", "channels", "classes")
_PRESET_VALUES = {
    "vit_b16": (197, 768, 12, 12, 16, 3, 10),
    "vit_l16": (197, 1024, 24, 16, 16, 3, 10),
    "bert_base": (128, 768, 12, 12, 0, 0, 2),
}
MODEL_PRESETS: dict[str, dict[str, Any]] = {
    name: dict(zip(_PRESET_FIELDS, values, strict=True)) for name, values in _PRESET_VALUES.items()
}


class ModelSpec(Strict):
    """A Transformer encoder: tokens N, width D, blocks, heads; patch embedding if a ViT."""

    # Hugging Face config.json names (ViT's, BERT's) of these fields, for error hints; None:
    # no one field (intermediate_size / hidden_size is mlp_ratio, tokens (image / patch)^2 + 1)
    KEY_HINTS: ClassVar[dict[str, str | None]] = {
        "num_hidden_layers": "blocks",
        "hidden_size": "width",
        "num_attention_heads": "heads",
        "num_channels": "channels",
        **dict.fromkeys(("intermediate_size", "image_size")),
    }

    preset: str | None = None
    tokens: Tokens = 197
    width: PositiveInt = 768
    blocks: PositiveInt = 12
    heads: PositiveInt = 12
    mlp_ratio: PositiveFloat = 4
    patch_size: Annotated[int, Field(ge=0)] = 16
    channels: Annotated[int, Field(ge=0)] = 3
    classes: PositiveInt = 10
    bytes_per_element: PositiveInt = 4

    @property
    def mlp_hidden(self) -> int:
        """Columns of a block's MLP (fc1's outputs): ``width x mlp_ratio``, rounded."""
        return round(self.width * self.mlp_ratio)

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        decoders = ", ".join(sorted(DECODER_PRESETS))
        known = f"known: {', '.join(sorted(MODEL_PRESETS))}; decoders: {decoders}"
        return with_preset(data, MODEL_PRESETS, lambda name: f"unknown preset {name}; {known}")

    @model_validator(mode="after")
    def _check_heads(self) -> ModelSpec:
        if self.width % self.heads:  # 'heads: ' names the field (schema.validation_error)
            raise ValueError(f"heads: width {self.width} is not divisible by {self.heads} heads")
        return self
