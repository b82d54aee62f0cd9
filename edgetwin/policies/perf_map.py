"""The performance map: latency and energy of every candidate over (tokens, batch, bandwidth);
a decoder's also over output tokens, with its TTFT and TPOT.

Profiled once (in the twin, or read from a results table in the results
schema: an emulator run or a hardware table), stored as JSON on the terminal
device, read at run time by the selection policies. Between grid points a
candidate's latency and energy are interpolated linearly in 1 / bandwidth (a
transfer's time goes so: ``models/bandwidth_axis.py``), in the batch and in the
sequence length (tokens); outside the grid batch and bandwidth are clamped to the
nearest edge, tokens extrapolated linearly from the two nearest profiled lengths
(``tokens_axis``); a decoder map's tokens are its prompt tokens, and its output
tokens are interpolated and extrapolated the same way (``DecoderCandidate``).
Schema: docs/adaptive.md. The candidates: ``perf_map_candidates``; a map from the
rows of a results table: ``perf_map_from_rows``; its file: ``perf_map_io``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import ConfigDict, Field, model_validator

from edgetwin.models import registry
from edgetwin.models.bandwidth_axis import along_bandwidth
from edgetwin.policies.perf_map_candidates import (
    DECODER_GRIDS,
    AnyCandidate,
    Candidate,
    Cell,
    DecoderCandidate,
    DecoderGrid,
    Deployment,
    Grid,
    candidate_kind,
)
from edgetwin.policies.tokens_axis import along_tokens
from edgetwin.schema import BandwidthMbps, PositiveInt, Strict

VERSION: Literal[2] = 2


class PerformanceMap(Strict):
    """Candidates profiled on one grid of tokens x batch x bandwidth (JSON on the terminal);
    a decoder's map (``output_tokens`` given) has prompt tokens x output tokens x batch x
    bandwidth, and TTFT and TPOT next to latency and energy."""

    format: Literal["edgetwin-performance-map"] = "edgetwin-performance-map"
    version: Literal[2] = VERSION
    scenario: str
    source: str
    tokens: tuple[PositiveInt, ...] = Field(min_length=1)  # a decoder's: prompt tokens
    output_tokens: tuple[PositiveInt, ...] | None = Field(None, min_length=1)  # decoders
    batches: tuple[PositiveInt, ...] = Field(min_length=1)
    bandwidths_mbps: tuple[BandwidthMbps, ...] = Field(min_length=1)
    candidates: tuple[AnyCandidate, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _check_grid(self) -> PerformanceMap:
        axes = {
            "tokens": self.tokens,
            **({} if self.output_tokens is None else {"output_tokens": self.output_tokens}),
            "batches": self.batches,
            "bandwidths_mbps": self.bandwidths_mbps,
        }
        for name, axis in axes.items():
            if list(axis) != sorted(set(axis)):
                raise ValueError(f"{name}: must be strictly increasing")
        shape = tuple(len(axis) for axis in axes.values())
        kind = "decoder" if self.decoder else "encoder"
        grids = DECODER_GRIDS if self.decoder else ("latency_ms", "energy_j")
        axes_names = "prompt x output tokens" if self.decoder else "tokens"
        for i, c in enumerate(self.candidates):
            if candidate_kind(c) != kind:
                article = "an" if kind == "encoder" else "a"
                raise ValueError(f"candidates.{i}: does not have the grids of {article} {kind} map")
            for key, dims in (("bytes_sent", shape[:-1]), *((g, shape) for g in grids)):
                if not _has_shape(getattr(c, key), dims):
                    size = " x ".join(map(str, dims))
                    raise ValueError(
                        f"candidates.{i}.{key}: must be {size} ({axes_names} x batch ...)"
                    )
        if not any(c.one_device for c in self.candidates):
            raise ValueError(f"candidates: the map needs a '{registry.baseline().name}' candidate")
        if len({c.label for c in self.candidates}) != len(self.candidates):
            raise ValueError("candidates: must be unique (strategy, cr, devices)")
        return self

    @property
    def decoder(self) -> bool:
        """Whether the map is a decoder's (an output tokens axis, TTFT and TPOT)."""
        return self.output_tokens is not None

    @property
    def single(self) -> Deployment:
        return next(c for c in self.candidates if c.one_device)

    @property
    def devices(self) -> tuple[int, ...]:
        """The device counts the map profiled (1: single), increasing."""
        return tuple(sorted({c.devices for c in self.candidates}))

    def resolve_tokens(self, tokens: float | None) -> float:
        """The sequence length of a query; None is allowed when the map has only one."""
        if tokens is not None:
            return tokens
        if len(self.tokens) > 1:
            raise ValueError(f"the map spans tokens {list(self.tokens)}; give the query's tokens")
        return self.tokens[0]

    def resolve_output_tokens(self, output_tokens: float | None) -> float | None:
        """A decoder query's output tokens (None allowed when the map has only one);
        None for an encoder's map, which a query's output tokens do not fit (they were
        ignored: the answer read as one for that output length)."""
        if self.output_tokens is None:
            if output_tokens is not None:
                raise ValueError("an encoder's map has no output tokens; leave them out")
            return None
        if output_tokens is not None:
            return output_tokens
        if len(self.output_tokens) > 1:
            known = list(self.output_tokens)
            raise ValueError(f"the map spans output tokens {known}; give the query's")
        return self.output_tokens[0]

    def grid_points(self) -> list[tuple[int, int | None, int, float]]:
        """Every (tokens, output tokens or None, batch, bandwidth) the map profiled."""
        outputs: Sequence[int | None] = self.output_tokens or (None,)
        return list(itertools.product(self.tokens, outputs, self.batches, self.bandwidths_mbps))

    def estimate(
        self,
        candidate: Deployment,
        batch: float,
        bandwidth_mbps: float,
        tokens: float,
        output_tokens: float | None = None,
    ) -> Estimate:
        """Latency and energy (a decoder's: also TTFT and TPOT) of ``candidate`` at a
        condition (interpolated; see the module)."""
        at = (tokens, output_tokens, batch, bandwidth_mbps)
        if isinstance(candidate, DecoderCandidate):
            values = {
                key: self._decoder_value(getattr(candidate, key), *at) for key in DECODER_GRIDS
            }
            return Estimate(**values)
        assert isinstance(candidate, Candidate)
        return Estimate(
            latency_ms=self._interpolate(candidate.latency_ms, tokens, batch, bandwidth_mbps),
            energy_j=self._interpolate(candidate.energy_j, tokens, batch, bandwidth_mbps),
        )

    def bytes_sent(
        self, candidate: Deployment, batch: float, tokens: float, output_tokens: float | None = None
    ) -> float:
        """Bytes a batch moves over all devices (interpolated like latency)."""
        if isinstance(candidate, DecoderCandidate):
            assert self.output_tokens is not None and output_tokens is not None
            outputs = self.output_tokens
            per_tokens = [
                along_tokens(output_tokens, outputs, [self._along_batch(batch, b) for b in plane])
                for plane in candidate.bytes_sent
            ]
        else:
            assert isinstance(candidate, Candidate)
            per_tokens = [self._along_batch(batch, b) for b in candidate.bytes_sent]
        return along_tokens(tokens, self.tokens, per_tokens)

    def _interpolate(self, grid: Grid, tokens: float, batch: float, bandwidth_mbps: float) -> float:
        per_tokens = [self._plane(plane, batch, bandwidth_mbps) for plane in grid]
        return along_tokens(tokens, self.tokens, per_tokens)

    def _decoder_value(
        self,
        grid: DecoderGrid,
        tokens: float,
        output_tokens: float | None,
        batch: float,
        bandwidth_mbps: float,
    ) -> float:
        """Batch x bandwidth as for an encoder, then along output tokens, then prompt tokens."""
        assert self.output_tokens is not None and output_tokens is not None
        outputs = self.output_tokens
        per_prompt = [
            along_tokens(
                output_tokens, outputs, [self._plane(p, batch, bandwidth_mbps) for p in by_output]
            )
            for by_output in grid
        ]
        return along_tokens(tokens, self.tokens, per_prompt)

    def _plane(
        self, plane: tuple[tuple[Cell, ...], ...], batch: float, bandwidth_mbps: float
    ) -> float:
        """Linear in 1 / bandwidth along each profiled batch, then in the batch; clamped."""
        values = [[math.nan if v is None else v for v in row] for row in plane]
        along_bw = [along_bandwidth(bandwidth_mbps, self.bandwidths_mbps, r) for r in values]
        return self._along_batch(batch, along_bw)

    def _along_batch(self, batch: float, values: Sequence[float]) -> float:
        """Linear in the batch between profiled batches (a step costs a fixed part, weights
        read and messages sent once, plus each sample's work: a + b x batch), clamped."""
        return float(np.interp(batch, self.batches, values))


def _has_shape(values: object, dims: Sequence[int]) -> bool:
    """Whether nested tuples ``values`` have exactly the lengths ``dims``."""
    if not dims:
        return True
    return (
        isinstance(values, tuple)
        and len(values) == dims[0]
        and all(_has_shape(v, dims[1:]) for v in values)
    )


class Estimate(Strict):
    """Latency and energy of one batch (a decoder's generation, and its TTFT and TPOT);
    NaN where the map has no value (infeasible) or the model is an encoder."""

    model_config = ConfigDict(allow_inf_nan=True)

    latency_ms: float
    energy_j: float
    ttft_ms: float = math.nan
    tpot_ms: float = math.nan
