"""A real model's weights: seeded random ones, or a state_dict from a file; then the
model is made ready for inference (no gradients, eval mode, on its device)."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch
from torch import nn

M = TypeVar("M", bound=nn.Module)


def with_weights(
    model: M,
    init_random: Callable[[M, int], None],
    seed: int,
    weights: Path | None,
    device: torch.device | str,
) -> M:
    """``model`` with ``init_random(model, seed)``'s weights, or those of ``weights``
    (``ValueError`` naming the file when it cannot be read or does not fit the model),
    ready for inference."""
    if weights is None:
        init_random(model, seed)
    else:
        try:
            state = torch.load(weights, map_location="cpu", weights_only=True)
        except (OSError, EOFError, RuntimeError, pickle.UnpicklingError) as exc:
            raise ValueError(f"{weights}: not a state_dict torch can load: {exc}") from None
        try:
            model.load_state_dict(state)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"{weights}: state_dict does not fit the model: {exc}") from None
    model.requires_grad_(False)
    return model.eval().to(device)
