"""Interpolation along a sequence length axis (a performance map's tokens, a decoder's
output tokens): linear between profiled lengths, extrapolated beyond them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def along_tokens(tokens: float, grid: Sequence[float], values: Sequence[float]) -> float:
    """Linear in tokens between profiled lengths; outside, extrapolated from the nearest two
    (latency and bytes grow about linearly with the sequence length), never below 0."""
    if tokens in grid:
        return values[list(grid).index(tokens)]
    if len(grid) == 1:
        return values[0]
    k = int(np.clip(np.searchsorted(grid, tokens), 1, len(grid) - 1))
    slope = (values[k] - values[k - 1]) / (grid[k] - grid[k - 1])
    value = values[k - 1] + slope * (tokens - grid[k - 1])
    return 0.0 if value < 0 else value
