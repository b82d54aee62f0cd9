"""The ViT and the pure pieces of the split (layout, segment means), in one process."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from edgetwin.emu.vit.forward import segment_means
from edgetwin.emu.vit.model import build_vit, image_side, make_images
from edgetwin.model_spec import ModelSpec
from edgetwin.models import registry

TINY = ModelSpec(tokens=17, width=32, blocks=2, heads=4, patch_size=2, classes=5)


def test_vit_b16_shapes() -> None:
    spec = ModelSpec(preset="vit_b16", blocks=1)
    model = build_vit(spec)
    assert image_side(spec) == 224
    assert model.patch_embed.proj.weight.shape == (768, 3, 16, 16)
    assert model.blocks[0].mlp.fc1.weight.shape == (3072, 768)
    with torch.inference_mode():
        assert model(make_images(spec, 2)).shape == (2, 10)


def test_patch_rows_match_the_convolution() -> None:
    model = build_vit(TINY)
    images = make_images(TINY, 3)
    conv = model.patch_embed.proj(images).flatten(2).transpose(1, 2)
    rows = model.embed_rows(images, 0, TINY.tokens)
    torch.testing.assert_close(rows[:, 1:], conv + model.pos_embed[:, 1:])
    torch.testing.assert_close(model.embed_rows(images, 5, 11), rows[:, 5:11])


def test_same_seed_same_weights_and_images() -> None:
    images = make_images(TINY, 4, seed=7)
    assert torch.equal(images[:2], make_images(TINY, 2, seed=7))
    first, second = build_vit(TINY, seed=7), build_vit(TINY, seed=7)
    assert torch.equal(first(images), second(images))
    assert not torch.equal(first(images), build_vit(TINY, seed=8)(images))


def test_weights_load_from_a_state_dict(tmp_path: Path) -> None:
    source = build_vit(TINY, seed=3)
    path = tmp_path / "vit.pt"
    torch.save(source.state_dict(), path)
    images = make_images(TINY, 2)
    assert torch.equal(build_vit(TINY, weights=path)(images), source(images))
    wrong = ModelSpec(tokens=17, width=32, blocks=3, heads=4, patch_size=2, classes=5)
    with pytest.raises(ValueError, match="does not fit the model"):
        build_vit(wrong, weights=path)


@pytest.mark.parametrize(
    "spec", [ModelSpec(preset="bert_base"), ModelSpec(tokens=18, patch_size=2, width=8, heads=2)]
)
def test_non_vit_models_are_refused(spec: ModelSpec) -> None:
    with pytest.raises(ValueError, match="a ViT needs"):
        image_side(spec)


def test_segment_means_of_unequal_segments() -> None:
    rows = torch.arange(2 * 7 * 3, dtype=torch.float32).reshape(2, 7, 3)
    means = segment_means(rows, (3, 2, 2))
    expected = torch.stack(
        [rows[:, 0:3].mean(1), rows[:, 3:5].mean(1), rows[:, 5:7].mean(1)], dim=1
    )
    torch.testing.assert_close(means, expected)
    assert torch.equal(segment_means(rows, (1,) * 7), rows)
    with pytest.raises(ValueError, match="do not split"):
        segment_means(rows, (2, 2, 3))


def test_layout_of_vit_b16_on_two_ranks() -> None:
    voltage = registry.layout("voltage", 197, 2)
    assert voltage.partition_rows == (99, 98)
    assert voltage.padded_rows == 99
    prism = registry.layout("prism", 197, 2, segments=10)
    assert prism.segment_rows == ((10,) * 9 + (9,), (10,) * 8 + (9,) * 2)
    counts = prism.context_log_counts(0)
    assert counts is not None and counts[:99] == (0.0,) * 99
    assert counts[99:] == (math.log(10),) * 8 + (math.log(9),) * 2
    assert registry.layout("prism", 197, 2, segments=99).context_log_counts(0) is None


@pytest.mark.parametrize(
    ("strategy", "world", "segments"),
    [("single", 2, None), ("voltage", 1, None), ("prism", 2, None), ("voltage", 2, 3)],
)
def test_layout_refuses_inconsistent_requests(
    strategy: str, world: int, segments: int | None
) -> None:
    with pytest.raises(ValueError):
        registry.layout(strategy, 17, world, segments)


@given(tokens=st.integers(2, 300), world=st.integers(2, 8), segments=st.integers(1, 200))
def test_prism_layout_accounts_for_every_token(tokens: int, world: int, segments: int) -> None:
    if world > tokens:
        return
    layout = registry.layout("prism", tokens, world, segments)
    assert layout.segment_rows is not None
    for rank, sizes in enumerate(layout.segment_rows):
        assert sum(sizes) == layout.partition_rows[rank]
        assert len(sizes) == min(segments, layout.partition_rows[rank])
        counts = layout.context_log_counts(rank)
        if counts is not None:
            assert len(counts) == layout.context_rows(rank)
            represented = sum(round(math.exp(c)) for c in counts)
            assert represented == tokens
