"""Aggregation at the end of a job: logits averaged across inputs, the majority class."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Verdict:
    """Per-input logits (input order), their classes, the mean and the majority class."""

    logits: np.ndarray  # inputs x classes, float64
    classes: tuple[int, ...]
    mean: np.ndarray
    majority: int


def aggregate(logits: Mapping[int, np.ndarray]) -> Verdict:
    """The majority class of the inputs' argmax; ties go to the larger mean logit."""
    stacked = np.stack([logits[i] for i in sorted(logits)]).astype(np.float64)
    classes = tuple(int(c) for c in stacked.argmax(axis=1))
    mean = stacked.mean(axis=0)
    counts = Counter(classes)
    majority = max(counts, key=lambda c: (counts[c], mean[c]))
    return Verdict(stacked, classes, mean, majority)
