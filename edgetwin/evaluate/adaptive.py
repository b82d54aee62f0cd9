"""Evaluate selection policies against the twin at held-out conditions, or against
measurements.

The map is profiled from the scenario's own sweeps at the sequence lengths
``map_tokens`` (a decoder's: its sweeps' prompt and output tokens), or read from a
results table. The ground truth is either the
scenario run again in the twin at the held-out conditions (``held_out``: with N
devices up, every candidate on at most N devices, single and each strategy on
2..N, also counts the map never profiled), or a table of measured runs
(``truth_table``: local, emulator or hardware rows; ``evaluate.measured``). The
oracle is the candidate with the lowest objective there. A policy's regret at a
condition is how much worse (%) the candidate it picked actually is than the
oracle's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from edgetwin.comparison import relative_pct
from edgetwin.decoder_spec import DecoderSpec
from edgetwin.errors import InputError
from edgetwin.evaluate.adaptive_inputs import (
    EvalSettings,
)
from edgetwin.evaluate.measured import (
    SkippedCell,
    measured_cells,
)
from edgetwin.evaluate.profiling import (
    decoder_rows,
    decoder_runs,
    decoder_steps,
    profile_twin,
    rows_at_tokens,
    sweep_steps,
)
from edgetwin.models import registry
from edgetwin.models.registry import CandidateKey
from edgetwin.policies.adaptive import (
    Objective,
    ObjectiveKind,
    SelectionPolicy,
    make_policy,
)
from edgetwin.policies.perf_map import (
    Estimate,
    PerformanceMap,
    grid_cell,
    map_from_table,
)
from edgetwin.results import ResultRow
from edgetwin.scenario import (
    Scenario,
    configurations,
)
from edgetwin.sim.runner import unplayed_in_twin

TIE_PCT = 1e-9  # a pick this close to the oracle's objective counts as correct


@dataclass(frozen=True)
class Choice:
    """What a policy picked at a condition and how it turned out in the twin."""

    label: str
    cost: float
    regret_pct: float


@dataclass(frozen=True)
class ConditionResult:
    """One held-out condition: the twin's value of every candidate, the oracle, the picks."""

    batch: int
    bandwidth_mbps: float
    devices: int  # how many are up; truth holds every candidate on at most that many
    tokens: int  # a decoder's: prompt tokens
    in_map: bool
    truth: dict[str, Estimate]
    oracle: str
    oracle_cost: float
    choices: dict[str, Choice]
    best_in_map: Choice  # the best candidate the map profiled; its regret: the map's gap
    output_tokens: int | None = None  # a decoder's

    def distributed_wins(self, policy: str | None) -> bool:
        """Whether the oracle (policy None) or the policy picked a distributed candidate."""
        label = self.oracle if policy is None else self.choices[policy].label
        return label != _baseline_label()


@dataclass(frozen=True)
class PolicyScore:
    """A policy over all held-out conditions."""

    decision_accuracy: float
    mode_accuracy: float
    mean_regret_pct: float
    max_regret_pct: float
    confusion: dict[str, dict[str, int]]  # oracle label -> chosen label -> count


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
    warnings: tuple[str, ...] = ()  # settings the twin's sweeps do not play (packet loss)
    infeasible: tuple[ConditionKey, ...] = ()  # every candidate failed there: not scored

    def __repr__(self) -> str:
        """A line a notebook can show: each policy's accuracy and mean regret."""
        scores = ", ".join(
            f"{name} {s.decision_accuracy:.3f} / {s.mean_regret_pct:.2f} %"
            for name, s in self.scores.items()
        )
        return (
            f"Evaluation({self.scenario}: {len(self.conditions)} conditions; "
            f"accuracy / mean regret: {scores})"
        )

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
                "weight": self.settings.weight if self.settings.objective == "weighted" else None,
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


def evaluation_steps(scenario: Scenario, settings: EvalSettings, map_table: Path | None) -> int:
    """The twin sweeps ``evaluate`` runs: the map's (unless read from a table), the held-out
    (unless measured runs are the truth)."""
    held_out = settings.held_out
    if isinstance(scenario.model, DecoderSpec):  # one step per configuration
        mapped = 0 if map_table is not None else len(configurations(scenario))
        truth = 0 if held_out is None else decoder_steps(decoder_runs(scenario, held_out.sweep()))
        return mapped + truth
    mapped = 0 if map_table is not None else sweep_steps(len(scenario.sweeps), settings.map_tokens)
    return mapped + (0 if held_out is None else sweep_steps(1, held_out.tokens))


def evaluate(
    scenario: Scenario,
    scenario_path: Path | None,
    settings: EvalSettings,
    map_table: Path | None = None,
    on_step: Callable[[], None] = lambda: None,
    *,
    truth_rows: Sequence[ResultRow] | None = None,
    truth_table: Path | None = None,
    settings_path: Path | None = None,
) -> Evaluation:
    """Profile (or read) the map, take the ground truth (the twin at the held-out conditions,
    or ``truth_rows`` measured, read from ``truth_table``), score each policy; ``on_step``
    is called after each twin sweep at one sequence length, for a decoder after each
    configuration (``evaluation_steps``). ``settings_path``: the evaluation file, named by
    the errors of its fields (``held_out``, ``policies``) found only here."""
    decoder = isinstance(scenario.model, DecoderSpec)
    objective = settings.objective_spec
    perf_map = (
        profile_twin(scenario, scenario_path, settings.map_tokens, on_step)
        if map_table is None
        else map_from_table(map_table, 0 if decoder else scenario.encoder.tokens)
    )
    if perf_map.decoder != decoder:
        kind = "a decoder's" if decoder else "an encoder's"
        raise InputError(map_table, None, f"the scenario runs {kind} model; the table does not")
    skipped: list[SkippedCell] = []
    if truth_rows is not None:
        rows = [_named_as_in_map(row, perf_map) for row in truth_rows]
        perf_map = _measured_candidates(perf_map, rows, truth_table)
        _check_ranked_values(objective, _row_values(objective, rows), truth_table, scenario_path)
        ranked = RANKED_COLUMNS[objective.kind]
        truth = _measured_truth(rows, perf_map, skipped, truth_table, ranked)
        source = f"table {truth_table.name if truth_table else 'of measured rows'}"
    else:
        assert settings.held_out is not None  # _check_one_truth: one of the two
        held_out = settings.held_out
        rows = (
            decoder_rows(decoder_runs(scenario, held_out.sweep()), scenario_path, on_step)
            if decoder
            else rows_at_tokens(scenario, scenario_path, held_out.sweep(), held_out.tokens, on_step)
        )
        if map_table is not None:
            rows = [_named_as_in_map(row, perf_map) for row in rows]
        held_out_outputs = (settings_path or scenario_path, "held_out.output_tokens")
        _check_ranked_values(
            objective, _row_values(objective, rows), None, scenario_path, held_out_outputs
        )
        truth = _truth_by_condition(rows, held_out.devices)
        source = "twin"
    map_outputs = (scenario_path, _output_tokens_field(scenario))
    _check_ranked_values(
        objective, _map_values(objective, perf_map), map_table, scenario_path, map_outputs
    )
    no_reference = _single_fails_where_others_run(truth) if objective.kind == "weighted" else None
    if no_reference is not None:
        problem = (
            f"objective weighted is relative to {_baseline_label()}'s latency and energy, and "
            f"{_baseline_label()} fails at {no_reference} where other candidates run: rank by "
            "latency or energy, or leave that condition out"
        )
        if truth_rows is not None:
            raise InputError(truth_table, None, problem)
        raise _settings_error(settings_path, scenario_path, "held_out", problem)
    infeasible = tuple(key for key, here in truth.items() if _nothing_runs(here, objective))
    if len(infeasible) == len(truth):
        nothing_runs = "every candidate fails at every held-out condition"
        if truth_rows is not None:
            raise InputError(truth_table, None, nothing_runs)
        raise _settings_error(settings_path, scenario_path, "held_out", nothing_runs)
    policies = {name: make_policy(name, perf_map, objective) for name in settings.policies}
    conditions = [
        _score_condition(key, here, perf_map, objective, policies, (map_table, settings_path))
        for key, here in truth.items()
        if key not in infeasible
    ]
    scores = {name: score_policy(name, conditions) for name in policies}
    keys = [_key(r) for r in rows] + [
        CandidateKey(c.strategy, c.devices, c.cr) for c in perf_map.candidates
    ]
    candidates = {key.label: key for key in keys}
    return Evaluation(
        scenario.name,
        settings,
        perf_map,
        tuple(conditions),
        scores,
        candidates,
        source,
        tuple(skipped),
        (*unplayed_in_twin(scenario, scenario_path), *_flopless(settings, perf_map)),
        infeasible,
    )


def _settings_error(
    settings_path: Path | None, scenario_path: Path | None, field: str, problem: str
) -> InputError:
    """An error of the evaluation file's ``field``; without the file (an API call with the
    settings alone), of the scenario, which the field's values were run on."""
    if settings_path is not None:
        return InputError(settings_path, field, problem)
    return InputError(scenario_path, None, problem)


# the results columns each objective ranks by (weighted divides energy by single's)
RANKED_COLUMNS: dict[ObjectiveKind, tuple[str, ...]] = {
    "latency": ("total_ms",),
    "energy": ("energy_j",),
    "weighted": ("total_ms", "energy_j"),
    "ttft": ("ttft_ms",),
    "tpot": ("tpot_ms",),
}


def _estimate_field(column: str) -> str:
    """The ``Estimate`` (and map grid) field of a results column."""
    return "latency_ms" if column == "total_ms" else column


def _check_ranked_values(
    objective: Objective,
    values: dict[str, list[float | None]],
    source: Path | None,
    scenario_path: Path | None,
    outputs: tuple[Path | None, str | None] = (None, None),
) -> None:
    """An InputError unless ``values`` (per results column the objective ranks by, the
    value of every run of one side that did not fail: the ground truth or the map) hold one
    above 0. ``source``: the table
    they come from, None for the twin (powers of 0: a profile without a power meter). The
    energy objectives on such profiles were a ZeroDivisionError (weighted) or ranked zeros,
    and on a truth table without energy_j said that every candidate fails everywhere.
    ``outputs``: the file and field of the twin side's output tokens, named when no TPOT
    is above 0 (one output token has no later one; it was blamed on a power meter)."""
    for column in RANKED_COLUMNS[objective.kind]:
        ran = values[column]  # none: every run failed (said below: every candidate fails)
        if not ran or any(v is not None and math.isfinite(v) and v > 0 for v in ran):
            continue
        ranks = f"objective {objective.kind} ranks by {column}"
        if source is None and column == "tpot_ms":
            problem = f"{ranks}, and a TPOT needs 2 or more output tokens"
            raise InputError(*outputs, problem)
        if source is None:
            problem = f"{ranks}, and the twin predicts none above 0 (no power meter)"
            raise InputError(scenario_path, "devices", problem)
        raise InputError(source, column, f"{ranks}, and no row has one above 0")


def _output_tokens_field(scenario: Scenario) -> str:
    """Where a decoder scenario's map takes its output tokens: the first sweep that lists
    them, else the workload."""
    listed = (i for i, sweep in enumerate(scenario.sweeps) if sweep.output_tokens)
    index = next(listed, None)
    return "workload.output_tokens" if index is None else f"sweeps.{index}.output_tokens"


def _row_values(objective: Objective, rows: Sequence[ResultRow]) -> dict[str, list[float | None]]:
    """Each ranked column's values in the results rows that did not fail."""
    ran = [r for r in rows if r.ok]
    return {c: [getattr(r, c) for r in ran] for c in RANKED_COLUMNS[objective.kind]}


def _map_values(objective: Objective, perf_map: PerformanceMap) -> dict[str, list[float | None]]:
    """Each ranked column's values in the map's grids."""
    columns = RANKED_COLUMNS[objective.kind]
    return {c: _grid_values(perf_map, _estimate_field(c)) for c in columns}


def _grid_values(perf_map: PerformanceMap, metric: str) -> list[float | None]:
    """Every cell of the map's ``metric`` grids that holds a value."""
    values: list[float | None] = []
    for candidate in perf_map.candidates:
        stack: list[Any] = [getattr(candidate, metric)]
        while stack:
            item = stack.pop()
            if isinstance(item, tuple | list):
                stack.extend(item)
            elif item is not None:
                values.append(float(item))
    return values


def _flopless(settings: EvalSettings, perf_map: PerformanceMap) -> list[str]:
    """A warning when flop_heuristic is scored on a map without the FLOPs it weighs (a
    results table without gflops_per_device): it then picks single at every condition."""
    if "flop_heuristic" not in settings.policies:
        return []
    single = perf_map.single.gflops_per_device
    spread = [
        c for c in perf_map.candidates if not c.one_device and c.gflops_per_device is not None
    ]
    if single is not None and spread:
        return []
    return [
        "flop_heuristic weighs each candidate's gflops_per_device, which the map lacks: "
        "it picks single at every condition"
    ]


def _single_fails_where_others_run(truth: dict[ConditionKey, dict[str, Estimate]]) -> str | None:
    """The first condition where single failed and another candidate ran (there the
    weighted objective, a ratio to single's, ranks nothing: every cost was inf, and the
    condition was dropped as one where every candidate fails), as text; None if none."""
    for key, here in truth.items():
        ran = [label for label, value in here.items() if not math.isnan(value.latency_ms)]
        if ran and _baseline_label() not in ran:
            return _condition_text(key)
    return None


def _condition_text(key: ConditionKey) -> str:
    """``batch 8, 600 Mbit/s, 4 devices up, 197 tokens`` (and ``, 32 output tokens``)."""
    batch, bw, devices, tokens, output = key
    outputs = "" if output is None else f", {output} output tokens"
    return f"batch {batch}, {bw:g} Mbit/s, {devices} devices up, {tokens} tokens{outputs}"


def _nothing_runs(truth: dict[str, Estimate], objective: Objective) -> bool:
    """Every candidate failed (ran out of memory): no pick is better, none is scored."""
    baseline = truth[_baseline_label()]
    return all(math.isinf(objective.cost(value, baseline)) for value in truth.values())


def _baseline_label() -> str:
    return registry.candidate_label(registry.baseline().name)


# batch, bandwidth_mbps, devices up, tokens, output tokens (None: an encoder)
ConditionKey = tuple[int, float, int, int, int | None]
Cell = tuple[int, float, int, int | None]  # batch, bandwidth_mbps, tokens, output tokens


def _score_condition(
    key: ConditionKey,
    truth: dict[str, Estimate],
    perf_map: PerformanceMap,
    objective: Objective,
    policies: dict[str, SelectionPolicy],
    files: tuple[Path | None, Path | None],
) -> ConditionResult:
    """The oracle, each policy's pick and the best profiled candidate at one condition;
    ``files``: the map table and the evaluation file, named by errors (None: not known)."""
    map_table, settings_path = files
    batch, bw, devices, tokens, output = key
    baseline = truth[_baseline_label()]
    costs = {label: objective.cost(value, baseline) for label, value in truth.items()}
    oracle = min(costs, key=costs.__getitem__)
    picks = {}
    for name, policy in policies.items():
        try:
            picks[name] = policy.choose(batch, bw, devices, tokens, output).label
        except ValueError as exc:
            raise InputError(settings_path or map_table, "policies", f"{name}: {exc}") from None
        if picks[name] not in costs:
            where = _condition_text(key)
            raise InputError(map_table, None, f"{name} picked {picks[name]}, not run at {where}")
    profiled = [label for label in costs if label in {c.label for c in perf_map.candidates}]
    best = min(profiled, key=costs.__getitem__)
    in_map = (
        batch in perf_map.batches
        and bw in perf_map.bandwidths_mbps
        and tokens in perf_map.tokens
        and devices in perf_map.devices
        and (output is None or output in (perf_map.output_tokens or ()))
    )

    def choice(label: str) -> Choice:
        return Choice(label, costs[label], regret_pct(costs[label], costs[oracle]))

    choices = {name: choice(label) for name, label in picks.items()}
    return ConditionResult(
        *(batch, bw, devices, tokens, in_map, truth, oracle, costs[oracle], choices, choice(best)),
        output,
    )


def _truth_by_condition(
    rows: list[ResultRow], devices_up: Sequence[int]
) -> dict[ConditionKey, dict[str, Estimate]]:
    """Held-out rows as condition -> candidate label -> latency and energy (NaN: failed);
    with N devices up, every candidate run on at most N devices, fewest devices first."""
    by_cell: dict[Cell, list[ResultRow]] = {}
    for r in sorted(rows, key=lambda r: r.devices):
        tokens, output, _, _ = grid_cell(r, 0)  # rows_at_tokens tags every encoder row
        by_cell.setdefault((r.batch, r.bandwidth_mbps, tokens, output), []).append(r)
    truth = {
        (batch, bw, up, tokens, output): {
            _key(r).label: _estimate(r) for r in here if r.devices <= up
        }
        for (batch, bw, tokens, output), here in by_cell.items()
        for up in devices_up
    }
    return dict(sorted(truth.items()))


def _measured_candidates(
    perf_map: PerformanceMap, rows: Sequence[ResultRow], table: Path | None
) -> PerformanceMap:
    """The map cut to the candidates the measurements have (policies pick among them)."""
    measured = {_key(r).label for r in rows}
    if _baseline_label() not in measured:
        raise InputError(table, None, f"no measured row of {_baseline_label()}")
    kept = tuple(c for c in perf_map.candidates if c.label in measured)
    return perf_map.model_copy(update={"candidates": kept})


def _measured_truth(
    rows: Sequence[ResultRow],
    perf_map: PerformanceMap,
    skipped: list[SkippedCell],
    table: Path | None,
    ranked: tuple[str, ...],
) -> dict[ConditionKey, dict[str, Estimate]]:
    """Measured cells that have every candidate of the map, each with the ``ranked``
    columns (the others go to ``skipped``: an unmeasured energy made a regret of inf), as
    condition -> candidate label -> latency and energy. A failed run counts as measured:
    there the candidate is infeasible."""
    truth: dict[ConditionKey, dict[str, Estimate]] = {}
    up = max(r.devices for r in rows)  # the set-up's devices, at every cell
    for batch, bw, tokens, output in measured_cells(rows):
        at_cell = [
            r
            for r in rows
            if (r.batch, r.bandwidth_mbps, r.tokens, r.output_tokens) == (batch, bw, tokens, output)
        ]
        here = {_key(r).label: _estimate(r) for r in at_cell}
        here_ranked = {_key(r).label for r in at_cell if _ranked_known(r, ranked)}
        missing = tuple(
            c.label for c in perf_map.candidates if c.devices <= up and c.label not in here_ranked
        )
        if missing:
            skipped.append(SkippedCell(batch, bw, tokens, missing, output))
        else:
            truth[(batch, bw, up, tokens, output)] = here
    if not truth:
        problem = "no measured cell has every candidate the policies pick from"
        raise InputError(table, None, f"{problem}, each with {' and '.join(ranked)}")
    return truth


def _ranked_known(row: ResultRow, ranked: tuple[str, ...]) -> bool:
    """A failed run, or one with a value in every ``ranked`` column."""
    values = [getattr(row, column) for column in ranked]
    return not row.ok or all(v is not None and math.isfinite(v) for v in values)


def _named_as_in_map(row: ResultRow, perf_map: PerformanceMap) -> ResultRow:
    """A twin row named by the CR of the map's candidate that runs its segments: a table
    names a candidate by the CR it ran (``edgetwin run``'s ``cr`` column: the one used),
    the twin by the one requested."""
    if row.cr is None or row.segments is None:
        return row
    tokens = grid_cell(row, perf_map.tokens[0])[0]
    for candidate in perf_map.candidates:
        same = (candidate.strategy, candidate.devices) == (row.strategy, row.devices)
        if same and candidate.segments(tokens) == row.segments:
            return replace(row, cr=candidate.cr)
    return row


def _key(row: ResultRow) -> CandidateKey:
    """A row's candidate (by CR, as the map knows it, not by the segments it resolves to)."""
    return CandidateKey(row.strategy, row.devices, row.cr)


def _estimate(row: ResultRow) -> Estimate:
    ok = row.ok

    def value(measured: float | None) -> float:
        return measured if ok and measured is not None else math.nan

    return Estimate(
        latency_ms=value(row.total_ms),
        energy_j=value(row.energy_j),
        ttft_ms=value(row.ttft_ms),
        tpot_ms=value(row.tpot_ms),
    )


def regret_pct(cost: float, oracle_cost: float) -> float:
    """How much worse (%) a pick's objective is than the oracle's (0 when it is the oracle)."""
    if cost == oracle_cost:
        return 0.0
    return relative_pct(cost, oracle_cost)


def score_policy(name: str, conditions: Sequence[ConditionResult]) -> PolicyScore:
    """Accuracy, regret and confusion matrix of policy ``name`` over ``conditions``."""
    regrets = [c.choices[name].regret_pct for c in conditions]
    correct = [
        c.choices[name].label == c.oracle or regret <= TIE_PCT
        for c, regret in zip(conditions, regrets, strict=True)
    ]
    same_mode = [c.distributed_wins(None) == c.distributed_wins(name) for c in conditions]
    confusion: dict[str, dict[str, int]] = {}
    for c in conditions:
        row = confusion.setdefault(c.oracle, {})
        row[c.choices[name].label] = row.get(c.choices[name].label, 0) + 1
    return PolicyScore(
        decision_accuracy=sum(correct) / len(conditions),
        mode_accuracy=sum(same_mode) / len(conditions),
        mean_regret_pct=sum(regrets) / len(regrets),
        max_regret_pct=max(regrets),
        confusion=confusion,
    )


def map_gap(conditions: Sequence[ConditionResult]) -> dict[str, float]:
    """Mean and max regret (%) of the best candidate the map profiled: the part of any
    map policy's regret that comes from what the map lacks (e.g. a device count)."""
    gaps = [c.best_in_map.regret_pct for c in conditions]
    return {
        "map_gap_mean_pct": round(sum(gaps) / len(gaps), 6),
        "map_gap_max_pct": round(max(gaps), 6),
    }


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
