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

Its parts: the ground truth (``adaptive_truth``), the checks of what is ranked
(``adaptive_checks``), the oracle, each pick and its regret (``adaptive_scores``), and
the ``Evaluation`` with its JSON (``adaptive_results``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from edgetwin.decoder_spec import DecoderSpec
from edgetwin.errors import InputError
from edgetwin.evaluate.adaptive_checks import (
    RANKED_COLUMNS,
    check_ranked_values,
    every_candidate_fails,
    flopless,
    map_values,
    output_tokens_field,
    row_values,
    settings_error,
    single_fails_where_others_run,
    unread_weight,
)
from edgetwin.evaluate.adaptive_inputs import EvalSettings
from edgetwin.evaluate.adaptive_results import Evaluation
from edgetwin.evaluate.adaptive_scores import baseline_label, score_condition, score_policy
from edgetwin.evaluate.adaptive_truth import (
    candidate_key,
    measured_candidates,
    measured_truth,
    named_as_in_map,
    truth_by_condition,
)
from edgetwin.evaluate.measured import SkippedCell
from edgetwin.evaluate.profiling import (
    Unplayed,
    decoder_rows,
    decoder_runs,
    decoder_steps,
    profile_twin,
    rows_at_tokens,
    sweep_steps,
)
from edgetwin.models.registry import CandidateKey
from edgetwin.policies.adaptive import WEIGHTED, make_policy
from edgetwin.policies.perf_map_from_rows import map_from_table
from edgetwin.progress import Advance
from edgetwin.results import ResultRow
from edgetwin.scenario import Scenario
from edgetwin.sim.fleet import unplayed_in_twin
from edgetwin.sim.network import unplayed_schedule
from edgetwin.sim.runner import warms_up

HELD_OUT = "held-out"  # how progress names the steps of the ground truth's sweeps


def evaluation_steps(scenario: Scenario, settings: EvalSettings, map_table: Path | None) -> int:
    """The twin sweeps ``evaluate`` runs: the map's (unless read from a table), the held-out
    (unless measured runs are the truth)."""
    held_out = settings.held_out
    if isinstance(scenario.model, DecoderSpec):  # one step per configuration and repetition
        mapped = 0 if map_table is not None else decoder_steps([scenario])
        truth = 0 if held_out is None else decoder_steps(decoder_runs(scenario, held_out.sweep()))
        return mapped + truth
    mapped = 0 if map_table is not None else sweep_steps(len(scenario.sweeps), settings.map_tokens)
    return mapped + (0 if held_out is None else sweep_steps(1, held_out.tokens))


def evaluate(
    scenario: Scenario,
    scenario_path: Path | None,
    settings: EvalSettings,
    map_table: Path | None = None,
    on_step: Advance | None = None,
    *,
    truth_rows: Sequence[ResultRow] | None = None,
    truth_table: Path | None = None,
    settings_path: Path | None = None,
) -> Evaluation:
    """Profile (or read) the map, take the ground truth (the twin at the held-out conditions,
    or ``truth_rows`` measured, read from ``truth_table``), score each policy; ``on_step``
    is told each twin sweep at one sequence length as it ends, for a decoder each
    configuration (``evaluation_steps``): ``map, 197 tokens``, ``held-out, 65 tokens``.
    ``settings_path``: the evaluation file, named by the errors of its fields
    (``held_out``, ``policies``) found only here."""
    decoder = isinstance(scenario.model, DecoderSpec)
    objective = settings.objective_spec
    map_unplayed: Unplayed = []
    held_out_unplayed: Unplayed = []
    perf_map = (
        profile_twin(scenario, scenario_path, settings.map_tokens, on_step, map_unplayed)
        if map_table is None
        else map_from_table(map_table, 0 if decoder else scenario.encoder.tokens)
    )
    if perf_map.decoder != decoder:
        kind = "a decoder's" if decoder else "an encoder's"
        raise InputError(map_table, None, f"the scenario runs {kind} model; the table does not")
    skipped: list[SkippedCell] = []
    if truth_rows is not None:
        rows = [named_as_in_map(row, perf_map) for row in truth_rows]
        perf_map = measured_candidates(perf_map, rows, truth_table)
        check_ranked_values(objective, row_values(objective, rows), truth_table, scenario_path)
        ranked = RANKED_COLUMNS[objective.kind]
        truth = measured_truth(rows, perf_map, skipped, truth_table, ranked)
        source = f"table {truth_table.name if truth_table else 'of measured rows'}"
    else:
        assert settings.held_out is not None  # _check_one_truth: one of the two
        held_out = settings.held_out
        rows = (
            decoder_rows(
                decoder_runs(scenario, held_out.sweep()),
                scenario_path,
                on_step,
                HELD_OUT,
                held_out_unplayed,
            )
            if decoder
            else rows_at_tokens(
                scenario,
                scenario_path,
                held_out.sweep(),
                held_out.tokens,
                on_step,
                HELD_OUT,
                held_out_unplayed,
            )
        )
        if map_table is not None:
            rows = [named_as_in_map(row, perf_map) for row in rows]
        held_out_outputs = (settings_path or scenario_path, "held_out.output_tokens")
        check_ranked_values(
            objective, row_values(objective, rows), None, scenario_path, held_out_outputs
        )
        truth = truth_by_condition(rows, held_out.devices)
        source = "twin"
    map_outputs = (scenario_path, output_tokens_field(scenario))
    check_ranked_values(
        objective, map_values(objective, perf_map), map_table, scenario_path, map_outputs
    )
    no_reference = single_fails_where_others_run(truth) if objective.kind == WEIGHTED else None
    if no_reference is not None:
        problem = (
            f"objective weighted is relative to {baseline_label()}'s latency and energy, and "
            f"{baseline_label()} fails at {no_reference} where other candidates run: rank by "
            "latency or energy, or leave that condition out"
        )
        if truth_rows is not None:
            raise InputError(truth_table, None, problem)
        raise settings_error(settings_path, scenario_path, "held_out", problem)
    infeasible = tuple(key for key, here in truth.items() if every_candidate_fails(here, objective))
    if len(infeasible) == len(truth):
        nothing_runs = "every candidate fails at every held-out condition"
        if truth_rows is not None:
            raise InputError(truth_table, None, nothing_runs)
        raise settings_error(settings_path, scenario_path, "held_out", nothing_runs)
    policies = {name: make_policy(name, perf_map, objective) for name in settings.policies}
    conditions = [
        score_condition(key, here, perf_map, objective, policies, (map_table, settings_path))
        for key, here in truth.items()
        if key not in infeasible
    ]
    scores = {name: score_policy(name, conditions) for name in policies}
    keys = [candidate_key(r) for r in rows] + [
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
        (
            *unread_weight(settings, settings_path),
            *unplayed_in_twin(scenario, scenario_path),
            *_unplayed_steps(scenario, map_unplayed, held_out_unplayed),
            *flopless(settings, perf_map),
        ),
        infeasible,
    )


def _unplayed_steps(scenario: Scenario, map_runs: Unplayed, held_out_runs: Unplayed) -> list[str]:
    """A warning per schedule step that some of the twin's map and held-out runs (each
    run's unplayed steps) ended before, as ``edgetwin run`` says it; a map read from a
    table, or a measured truth, ran none."""
    parts = [part for part, runs in (("map", map_runs), (HELD_OUT, held_out_runs)) if runs]
    runs = [*map_runs, *held_out_runs]
    return unplayed_schedule(runs, warms_up(scenario), f"{' and '.join(parts)} runs")
