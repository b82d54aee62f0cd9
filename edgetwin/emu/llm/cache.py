"""A rank's KV cache: preallocated keys and values per layer it holds, by slot.

Slots are filled in order; a slot is not a position (a position-wise rank keeps only
some positions). Rotary keys are stored rotated, so the order of slots does not matter.
"""

from __future__ import annotations

import torch
from torch import Tensor

ALL = slice(None)


class KVCache:
    """[layers, B, KV heads, slots, d_h] keys and values."""

    def __init__(
        self,
        layers: int,
        batch: int,
        kv_heads: int,
        head_dim: int,
        slots: int,
        device: torch.device | str = "cpu",
    ) -> None:
        shape = (layers, batch, kv_heads, slots, head_dim)
        self.keys = torch.zeros(shape, device=device)
        self.values = torch.zeros(shape, device=device)

    @property
    def nbytes(self) -> int:
        """Bytes of the keys and values held (every slot, filled or not)."""
        return self.keys.nbytes + self.values.nbytes

    def put(self, layer: int, keys: Tensor, values: Tensor, slot: int, batch: slice = ALL) -> None:
        """Store ``keys`` and ``values`` [b, KV heads, t, d_h] at slots ``slot`` .. + t."""
        stop = slot + keys.shape[2]
        self.keys[layer, batch, :, slot:stop] = keys
        self.values[layer, batch, :, slot:stop] = values

    def view(self, layer: int, stop: int, batch: slice = ALL) -> tuple[Tensor, Tensor]:
        """Keys and values of slots 0 .. ``stop`` - 1."""
        return self.keys[layer, batch, :, :stop], self.values[layer, batch, :, :stop]
