"""What an adaptive evaluation found (``Evaluation``): the scored conditions and each
policy's score, the crossover batch, accuracy and regret per axis, and the mapping
``evaluation.json`` holds (``to_json``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from edgetwin.errors import warnings_note
from edgetwin.evaluate.adaptive_inputs import EvalSettings
from edgetwin.evaluate.adaptive_scores import (
    Choice,
    ConditionKey,
    ConditionResult,
    PolicyScore,
    map_gap,
    score_policy,
)
from edgetwin.evaluate.measured import SkippedCell
from edgetwin.models.registry import CandidateKey
from edgetwin.number_text import counted, exact_text
from edgetwin.policies.adaptive import WEIGHTED
from edgetwin.policies.perf_map import Estimate, PerformanceMap


@dataclass(frozen=True)
class Evaluation:
    """Everything ``evaluate`` measured; ``to_json`` is what evaluation.json holds."""

    scenario: str
    settings: EvalSettings
    perf_map: PerformanceMap
    conditions: tuple[ConditionResult, ...]
    scores: dict[str, PolicyScore]
    candidates: dict[str, CandidateKey]  # every label above -> what it stands for
    truth_source: str = "twin"  # or "table NAME" (measured runs)
    skipped: tuple[SkippedCell, ...] = ()  # measured cells lacking a candidate
    warnings: tuple[str, ...] = ()  # settings not played (packet loss, a weight not read)
    infeasible: tuple[ConditionKey, ...] = ()  # every candidate failed there: not scored

    def __repr__(self) -> str:
        """A line a notebook can show: each policy's accuracy and mean regret, and how many
        warnings."""
        scores = ", ".join(
            f"{name} {s.decision_accuracy:.3f} / {s.mean_regret_pct:.2f} %"
            for name, s in self.scores.items()
        )
        return (
            f"Evaluation({self.scenario}: {len(self.conditions)} conditions; "
            f"accuracy / mean regret: {scores}{warnings_note(self.warnings)})"
        )

    def describe(self) -> list[str]:
        """The lines ``edgetwin evaluate`` prints after its warnings: the ground truth and
        how many conditions it scored, those where every candidate failed, the measured
        cells it skipped, then each policy's accuracy and regret."""
        lines = [f"ground truth: {self.truth_source}, {counted(len(self.conditions), 'condition')}"]
        if self.infeasible:
            infeasible = counted(len(self.infeasible), "condition")
            lines.append(f"not scored: {infeasible} where every candidate fails")
        lines += [skipped_line(cell) for cell in self.skipped]
        lines += [
            f"{name}: accuracy {score.decision_accuracy:.3f}, regret mean "
            f"{score.mean_regret_pct:.2f} % max {score.max_regret_pct:.2f} %"
            for name, score in self.scores.items()
        ]
        return lines

    def crossover_batch(self) -> list[dict[str, Any]]:
        """Per bandwidth, device count and tokens (a decoder's: and output tokens): the
        smallest batch where distributed wins."""
        names: tuple[str, ...] = ("bandwidth_mbps", "devices", "tokens")
        if self.perf_map.decoder:
            names += ("output_tokens",)

        def group_of(c: ConditionResult) -> tuple[Any, ...]:
            return tuple(getattr(c, name) for name in names)

        groups = sorted({group_of(c) for c in self.conditions})
        rows = []
        for group in groups:
            here = sorted(
                (c for c in self.conditions if group_of(c) == group), key=lambda c: c.batch
            )
            row: dict[str, Any] = dict(zip(names, group, strict=True))
            for who in ("oracle", *self.scores):
                policy = None if who == "oracle" else who
                row[who] = next((c.batch for c in here if c.distributed_wins(policy)), None)
            rows.append(row)
        return rows

    def by_axis(self, policy: str) -> dict[str, list[dict[str, Any]]]:
        """Accuracy and regret of ``policy`` per value of each axis; ``in_map``: the value is
        a grid point of the map on that axis (else the policy interpolated or extrapolated)."""
        m = self.perf_map
        grid: dict[str, tuple[str, Sequence[float]]] = {  # axis -> condition field, grid
            "batch": ("batch", m.batches),
            "bandwidth_mbps": ("bandwidth_mbps", m.bandwidths_mbps),
            "tokens": ("tokens", m.tokens),
            "devices": ("devices", m.devices),
        }
        if m.output_tokens is not None:  # a decoder's tokens are its prompt's
            del grid["tokens"]
            grid["prompt_tokens"] = ("tokens", m.tokens)
            grid["output_tokens"] = ("output_tokens", m.output_tokens)
        table: dict[str, list[dict[str, Any]]] = {}
        for axis, (attribute, profiled) in grid.items():
            values = sorted({getattr(c, attribute) for c in self.conditions})
            table[axis] = []
            for value in values:
                here = [c for c in self.conditions if getattr(c, attribute) == value]
                score = score_policy(policy, here)
                table[axis].append(
                    {
                        axis: value,
                        "in_map": value in profiled,
                        "conditions": len(here),
                        "decision_accuracy": round(score.decision_accuracy, 6),
                        "mean_regret_pct": round(score.mean_regret_pct, 6),
                        "max_regret_pct": round(score.max_regret_pct, 6),
                        **map_gap(here),
                    }
                )
        return table

    def to_json(self) -> dict[str, Any]:
        """``evaluation.json``: an infinite regret (the pick ran out of memory where another
        candidate ran) is ``null``, as JSON has no Infinity."""
        adaptive = self.scores["adaptive"]
        held_out = self.settings.held_out
        return _finite_or_null(  # type: ignore[no-any-return]
            {
                "scenario": self.scenario,
                "objective": self.settings.objective,
                "weight": self.settings.weight if self.settings.objective == WEIGHTED else None,
                "map": {
                    "source": self.perf_map.source,
                    "tokens": list(self.perf_map.tokens),
                    **_decoder_axis(self.perf_map),
                    "devices": list(self.perf_map.devices),
                    "batches": list(self.perf_map.batches),
                    "bandwidths_mbps": list(self.perf_map.bandwidths_mbps),
                    "candidates": [c.label for c in self.perf_map.candidates],
                },
                "held_out": None if held_out is None else held_out.model_dump(mode="json"),
                "truth": {
                    "source": self.truth_source,
                    "skipped": [_skipped_json(cell) for cell in self.skipped],
                },
                "conditions_count": len(self.conditions),
                "conditions_infeasible": len(self.infeasible),
                "decision_accuracy": adaptive.decision_accuracy,
                "mean_regret_pct": adaptive.mean_regret_pct,
                "max_regret_pct": adaptive.max_regret_pct,
                **map_gap(self.conditions),
                "by_axis": self.by_axis("adaptive"),
                "policies": {name: _score_json(score) for name, score in self.scores.items()},
                "crossover_batch": self.crossover_batch(),
                "conditions": [_condition_json(c) for c in self.conditions],
            }
        )


def _score_json(score: PolicyScore) -> dict[str, Any]:
    return {
        "decision_accuracy": round(score.decision_accuracy, 6),
        "mode_accuracy": round(score.mode_accuracy, 6),
        "mean_regret_pct": round(score.mean_regret_pct, 6),
        "max_regret_pct": round(score.max_regret_pct, 6),
        "confusion": score.confusion,
    }


def _condition_json(c: ConditionResult) -> dict[str, Any]:
    decoder = c.output_tokens is not None
    return {
        "batch": c.batch,
        "bandwidth_mbps": c.bandwidth_mbps,
        "devices": c.devices,
        "tokens": c.tokens,
        **({"output_tokens": c.output_tokens} if decoder else {}),
        "in_map": c.in_map,
        "oracle": c.oracle,
        "truth": {label: _estimate_json(e, decoder) for label, e in c.truth.items()},
        "choices": {name: _choice_json(ch) for name, ch in c.choices.items()},
        "best_in_map": _choice_json(c.best_in_map),
    }


def _estimate_json(estimate: Estimate, decoder: bool) -> dict[str, float | None]:
    values = {"latency_ms": _num(estimate.latency_ms), "energy_j": _num(estimate.energy_j)}
    if decoder:
        values |= {"ttft_ms": _num(estimate.ttft_ms), "tpot_ms": _num(estimate.tpot_ms)}
    return values


def _decoder_axis(perf_map: PerformanceMap) -> dict[str, list[int]]:
    """A decoder map's output tokens axis (nothing for an encoder's)."""
    return {} if perf_map.output_tokens is None else {"output_tokens": list(perf_map.output_tokens)}


def _skipped_json(cell: SkippedCell) -> dict[str, Any]:
    record = {**asdict(cell), "missing": list(cell.missing)}
    if cell.output_tokens is None:  # an encoder's cell
        del record["output_tokens"]
    return record


def _choice_json(choice: Choice) -> dict[str, Any]:
    return {"label": choice.label, "regret_pct": round(choice.regret_pct, 6)}


def _finite_or_null(value: Any) -> Any:
    """``value`` with every float that is not finite (in lists and dicts) as None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite_or_null(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite_or_null(item) for item in value]
    return value


def _num(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)


def skipped_line(cell: SkippedCell) -> str:
    """A measured cell the evaluation could not score, and which candidates it lacks (a
    decoder's cell: its prompt and output tokens)."""
    tokens = f"{cell.tokens} tokens"
    if cell.output_tokens is not None:
        tokens = f"{cell.tokens} prompt and {cell.output_tokens} output tokens"
    where = f"batch {cell.batch}, {exact_text(cell.bandwidth_mbps)} Mbps, {tokens}"
    return f"skipped {where}: not measured for {', '.join(cell.missing)}"
