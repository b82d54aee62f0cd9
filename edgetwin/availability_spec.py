"""Availability of a device or phone: up/down renewal processes and their distributions.

A scenario's device classes and crowd phone classes come and go by an ``Availability``
(twin only); a crowd job's interarrival is a ``Distribution`` too.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import Field, model_validator

from edgetwin.schema import NonNegativeFloat, PositiveFloat, Strict

_MAX_EXPONENT = 700.0  # math.exp overflows a float past about 709


class ConstantDist(Strict):
    kind: Literal["constant"]
    value_s: NonNegativeFloat

    @property
    def expected_s(self) -> float:
        return self.value_s


class ExponentialDist(Strict):
    kind: Literal["exponential"]
    mean_s: PositiveFloat

    @property
    def expected_s(self) -> float:
        return self.mean_s


class WeibullDist(Strict):
    kind: Literal["weibull"]
    shape: PositiveFloat
    scale_s: PositiveFloat

    @property
    def expected_s(self) -> float:
        """scale x Gamma(1 + 1/shape)."""
        return self.scale_s * math.exp(min(math.lgamma(1 + 1 / self.shape), _MAX_EXPONENT))


class LognormalDist(Strict):
    kind: Literal["lognormal"]
    median_s: PositiveFloat
    sigma: NonNegativeFloat

    @property
    def expected_s(self) -> float:
        """median x exp(sigma^2 / 2)."""
        return self.median_s * math.exp(min(self.sigma * self.sigma / 2, _MAX_EXPONENT))


Distribution = Annotated[
    ConstantDist | ExponentialDist | WeibullDist | LognormalDist,
    Field(discriminator="kind"),
]


class Availability(Strict):
    """Up/down renewal process of a device (a volunteer coming and going)."""

    up: Distribution
    down: Distribution
    start_up: bool = True

    @model_validator(mode="after")
    def _check_cycle(self) -> Availability:
        if self.up.expected_s == 0 and self.down.expected_s == 0:  # a crowd run hung on it
            raise ValueError("up and down both last 0 s: a cycle that takes no time never ends")
        return self
