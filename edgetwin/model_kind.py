"""A scenario's model is an encoder's or a decoder's: ``kind: decoder`` or a decoder preset
says which, and a key of the other kind is refused naming it."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Discriminator, Tag

from edgetwin.decoder_spec import DECODER_PRESETS, DecoderSpec
from edgetwin.model_spec import MODEL_PRESETS, ModelSpec


def _model_kind(value: Any) -> str:
    if isinstance(value, DecoderSpec):
        return "decoder"
    if isinstance(value, dict):
        preset = value.get("preset")
        if value.get("kind") == "decoder" or (
            isinstance(preset, str) and preset in DECODER_PRESETS
        ):
            return "decoder"
    return "encoder"


AnyModel = Annotated[
    Annotated[ModelSpec, Tag("encoder")] | Annotated[DecoderSpec, Tag("decoder")],
    Discriminator(_model_kind),
]


# the keys a decoder's model has and an encoder's has not (``kind`` says which it is), and
# the other way round
_DECODER_KEYS = tuple(
    k for k in DecoderSpec.model_fields if k not in {*ModelSpec.model_fields, "kind"}
)


_ENCODER_KEYS = tuple(k for k in ModelSpec.model_fields if k not in DecoderSpec.model_fields)


def model_kind_problem(model: dict[str, Any]) -> str | None:
    """Why a model mapping is not the kind its keys say, the message led by the field it is
    about: a ``kind`` other than decoder's, a decoder's keys on a model read as an encoder's
    (no ``kind``; no preset, or an encoder's), or an encoder's keys on a decoder's (each
    was an unknown key)."""
    kind, preset = model.get("kind"), model.get("preset")
    if "kind" in model and kind != "decoder":
        return f"model.kind: {kind!r} is not a kind: decoder for a decoder, none for an encoder"
    if _model_kind(model) == "decoder":
        keys = [key for key in model if key in _ENCODER_KEYS]
        if not keys:
            return None
        named = f"preset {preset!r}" if preset in DECODER_PRESETS else "kind: decoder"
        return f"model.{keys[0]}: an encoder's key, and this model is a decoder ({named})"
    encoder_preset = isinstance(preset, str) and preset in MODEL_PRESETS
    if preset is not None and not encoder_preset:
        return None
    keys = [key for key in model if key in _DECODER_KEYS]
    if not keys:
        return None
    if encoder_preset:
        decoders = ", ".join(sorted(DECODER_PRESETS))
        says = f"a decoder model names a decoder preset ({decoders}) or says kind: decoder"
        return f"model.{keys[0]}: a decoder's key, and preset {preset!r} is an encoder; {says}"
    are = "is a decoder's key" if len(keys) == 1 else "are a decoder's keys"
    says = "a decoder model says kind: decoder (or names a decoder preset)"
    return f"model.kind: required key is missing: {', '.join(keys)} {are}; {says}"
