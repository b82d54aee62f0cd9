"""The candidates of a performance map: what each deploys (strategy, devices, CR) and its
profiled grids, an encoder's ([tokens][batch][bandwidth]) or a decoder's (also over
output tokens, with its TTFT and TPOT).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from edgetwin.models import registry
from edgetwin.models.layout import segments_for_cr
from edgetwin.schema import PositiveFloat, PositiveInt, Strict

Cell = Annotated[float, Field(ge=0)] | None  # None: failed run or not measured
Grid = tuple[tuple[tuple[Cell, ...], ...], ...]  # [tokens][batch][bandwidth]
DecoderGrid = tuple[Grid, ...]  # [prompt tokens][output tokens][batch][bandwidth]
CANDIDATES_BY_CR = "a map tells the candidates of a strategy with segments apart by their CR"


class Deployment(Strict):
    """What a candidate deploys; a Prism candidate is identified by its CR, its segments
    follow the sequence length (L = round(tokens / (CR x devices)), as the twin and the
    real code resolve a CR; a decoder's tokens are its prompt's)."""

    strategy: str
    devices: PositiveInt
    cr: PositiveFloat | None = None
    # per sample at the first length (the heuristic uses only its ratio to single's)
    gflops_per_device: Annotated[float, Field(ge=0)] | None = None

    @field_validator("strategy")
    @classmethod
    def _selectable(cls, name: str) -> str:
        if not registry.strategy(name).selectable:
            raise ValueError(f"{name} is not a strategy the adaptive policy may pick")
        return name

    @model_validator(mode="after")
    def _fits_its_strategy(self) -> Deployment:
        """One device for a one-device strategy, two or more for a split; a CR exactly where
        the strategy takes one (a policy resolves the segments it deploys from it)."""
        definition = registry.strategy(self.strategy)
        if definition.one_device and self.devices != 1:
            raise ValueError(f"{self.strategy} runs on 1 device, not {self.devices}")
        if not definition.one_device and self.devices < 2:
            raise ValueError(f"{self.strategy} runs on 2 or more devices, not {self.devices}")
        if definition.params and self.cr is None:
            raise ValueError(f"{self.strategy} needs its cr: {CANDIDATES_BY_CR}")
        if not definition.params and self.cr is not None:
            raise ValueError(f"{self.strategy} takes no cr")
        return self

    def segments(self, tokens: float) -> int | None:
        """Segments L of a candidate with a CR at a sequence length (None otherwise)."""
        if self.cr is None:
            return None
        return segments_for_cr(round(tokens), self.devices, self.cr)

    @property
    def one_device(self) -> bool:
        return registry.strategy(self.strategy).one_device

    @property
    def label(self) -> str:
        """``single``, ``voltage x2``, ``prism cr 9.9 x2`` (``registry.candidate_label``)."""
        return registry.candidate_label(self.strategy, self.devices, self.cr)


class Candidate(Deployment):
    """One deployment the policy can pick, with its profiled grid ([tokens][batch][bandwidth])."""

    bytes_sent: tuple[tuple[Annotated[float, Field(ge=0)], ...], ...]  # [tokens][batch]
    latency_ms: Grid
    energy_j: Grid


class DecoderCandidate(Deployment):
    """A decoder deployment: its grids are [prompt tokens][output tokens][batch][bandwidth];
    latency and energy are the whole generation's, next to its TTFT and TPOT."""

    bytes_sent: tuple[tuple[tuple[Annotated[float, Field(ge=0)], ...], ...], ...]
    latency_ms: DecoderGrid
    energy_j: DecoderGrid
    ttft_ms: DecoderGrid
    tpot_ms: DecoderGrid


DECODER_GRIDS = ("latency_ms", "energy_j", "ttft_ms", "tpot_ms")


def candidate_kind(value: object) -> str:
    if isinstance(value, DecoderCandidate) or (isinstance(value, dict) and "ttft_ms" in value):
        return "decoder"
    return "encoder"


AnyCandidate = Annotated[
    Annotated[Candidate, Tag("encoder")] | Annotated[DecoderCandidate, Tag("decoder")],
    Discriminator(candidate_kind),
]
