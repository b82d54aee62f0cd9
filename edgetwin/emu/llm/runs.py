"""One real decoder run: what the launcher asks for and every rank's worker parses.

Pure (no torch): the launcher checks a run before it starts any process, and the
worker's flags are written and read here, so the two cannot drift apart.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from edgetwin.decoder_spec import DecoderSpec, positions_problem
from edgetwin.models.layout import Layout, partition_sizes
from edgetwin.models.registry import layout as registry_layout
from edgetwin.models.strategies import pipeline, prism, single, tensor_parallel, voltage

POSITION_WISE = (voltage.NAME, prism.NAME)
DECODER_STRATEGIES = (single.NAME, pipeline.NAME, tensor_parallel.NAME, *POSITION_WISE)


def model_problem(spec: DecoderSpec) -> tuple[str, str] | None:
    """The field of ``spec`` that the real decoder cannot build, and why (None when it
    can): rotary positions rotate pairs of a head's features, so a head's size must be
    even."""
    if spec.positions == "rope" and spec.head_dim % 2:
        why = f"rotary positions need an even head size (width / heads = {spec.head_dim})"
        return "heads", why
    return None


@dataclass(frozen=True)
class DecoderRun:
    """Greedy generation of ``output_tokens`` after a ``prompt_tokens`` prompt for
    ``batch`` sequences, by ``strategy`` on ``world`` ranks. ``segments``: prism's
    segments per rank. ``layer_split``: pipeline's layers per rank (default: equal, the
    first ranks taking the remainder). Raises ``ValueError`` saying what does not fit."""

    spec: DecoderSpec
    strategy: str
    world: int
    prompt_tokens: int
    output_tokens: int = 1
    batch: int = 1
    segments: int | None = None
    layer_split: tuple[int, ...] | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.strategy not in DECODER_STRATEGIES:
            raise ValueError(
                f"unknown decoder strategy {self.strategy!r}; known: "
                f"{', '.join(DECODER_STRATEGIES)}"
            )
        for name in ("world", "prompt_tokens", "output_tokens", "batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 (got {getattr(self, name)})")
        if (self.strategy == single.NAME) != (self.world == 1):
            raise ValueError(f"{self.strategy} cannot run on {self.world} rank(s)")
        too_long = positions_problem(self.spec, self.prompt_tokens, self.output_tokens)
        if too_long:
            raise ValueError(too_long)
        unbuildable = model_problem(self.spec)
        if unbuildable is not None:
            raise ValueError(unbuildable[1])
        if (self.segments is not None) != (self.strategy == prism.NAME):
            raise ValueError(f"segments are for {prism.NAME} (which needs them)")
        if self.layer_split is not None and self.strategy != pipeline.NAME:
            raise ValueError(f"layer_split is for {pipeline.NAME} only")
        if self.strategy == pipeline.NAME:
            self.stage_layers  # noqa: B018  (checks the split)
        if self.strategy == tensor_parallel.NAME:
            spec = self.spec
            if spec.heads % self.world or spec.kv_heads % self.world:
                raise ValueError(
                    f"{tensor_parallel.NAME} needs heads ({spec.heads}) and kv_heads "
                    f"({spec.kv_heads}) divisible by {self.world} ranks"
                )
            if spec.ffn_size < self.world:
                raise ValueError(f"ffn_size {spec.ffn_size} < {self.world} ranks")
        if self.strategy in POSITION_WISE:
            self.layout  # noqa: B018  (checks the split)

    @property
    def stage_layers(self) -> tuple[int, ...]:
        """Pipeline: layers of each rank, in order."""
        layers = self.spec.layers
        if self.layer_split is None:
            if self.world > layers:
                raise ValueError(f"{layers} layers cannot be split over {self.world} ranks")
            return partition_sizes(layers, self.world)
        split = tuple(self.layer_split)
        if len(split) != self.world or min(split) < 1 or sum(split) != layers:
            raise ValueError(
                f"layer_split {list(split)} must give each of {self.world} ranks >= 1 "
                f"layer, {layers} in all"
            )
        return split

    @property
    def layout(self) -> Layout:
        """Voltage and prism: the prompt positions each rank holds and sends."""
        return registry_layout(self.strategy, self.prompt_tokens, self.world, self.segments)

    def worker_args(self) -> list[str]:
        """The worker flags that describe this run (all but rank and process group)."""
        args = [
            *("--model", self.spec.model_dump_json(exclude_defaults=True)),
            *("--strategy", self.strategy, "--world", str(self.world)),
            *("--prompt-tokens", str(self.prompt_tokens)),
            *("--output-tokens", str(self.output_tokens), "--batch", str(self.batch)),
            *("--seed", str(self.seed)),
        ]
        if self.segments is not None:
            args += ["--segments", str(self.segments)]
        if self.layer_split is not None:
            args += ["--layer-split", *map(str, self.layer_split)]
        return args


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """The flags ``worker_args`` writes."""
    what = parser.add_argument_group("what to run")
    what.add_argument(
        "--model",
        default="{}",
        help='DecoderSpec as JSON, e.g. \'{"preset": "gpt2_small", "layers": 2}\'',
    )
    what.add_argument("--strategy", choices=DECODER_STRATEGIES, required=True)
    what.add_argument("--world", type=int, required=True, help="number of ranks P")
    what.add_argument("--prompt-tokens", type=int, required=True)
    what.add_argument("--output-tokens", type=int, default=1)
    what.add_argument("--batch", type=int, default=1, help="sequences generated at once")
    what.add_argument("--segments", type=int, help="prism: segments per rank")
    what.add_argument("--layer-split", type=int, nargs="+", help="pipeline: layers per rank")
    what.add_argument("--seed", type=int, default=0, help="random weights and prompt")


def run_from_args(args: argparse.Namespace) -> DecoderRun:
    """The run the flags describe; ``ValueError`` for a bad model or run."""
    try:
        spec = DecoderSpec.model_validate(json.loads(args.model))
    except (json.JSONDecodeError, ValidationError) as exc:
        if isinstance(exc, ValidationError):  # a model check's message names its field
            message = exc.errors()[0]["msg"].removeprefix("Value error, ")
        else:
            message = str(exc)
        raise ValueError(f"bad --model: {message}") from None
    split: Sequence[int] | None = args.layer_split
    return DecoderRun(
        spec,
        args.strategy,
        args.world,
        args.prompt_tokens,
        args.output_tokens,
        args.batch,
        args.segments,
        None if split is None else tuple(split),
        args.seed,
    )
