"""Answers to the questions from the rows of a sweep (JSON-ready dicts): the question's
kinds each answered by its module (``crossover``, ``smallest_fleet``, ``best_mode``,
``longest_context``; a crowd's ``capacity``), over the statistics of ``answer_stats``.
The answers as text: ``answer_text``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from edgetwin.plan.answer_stats import group
from edgetwin.plan.best_mode import best_mode
from edgetwin.plan.capacity import crowd_capacity
from edgetwin.plan.crossover import crossover
from edgetwin.plan.longest_context import longest_context
from edgetwin.plan.question_file import LoadedQuestion
from edgetwin.plan.questions import (
    AnyKind,
    BestMode,
    Crossover,
    CrowdAxes,
    CrowdCapacity,
    LongestContext,
    SmallestFleet,
)
from edgetwin.plan.smallest_fleet import smallest_fleet
from edgetwin.results import ResultRow
from edgetwin.sweep_points import configurations

QUESTIONS = "questions"  # the kind of a file that lists several questions


def answer(loaded: LoadedQuestion, rows: Sequence[ResultRow]) -> dict[str, Any]:
    """The answer to the question from its sweep's rows (a list of questions: one answer
    each, under ``answers``)."""
    question = loaded.question
    answers = [{"kind": kind.kind} | _answer_one(loaded, kind, rows) for kind in question.kinds]
    if len(answers) == 1:
        return {"question": question.name} | answers[0]
    return {"question": question.name, "kind": QUESTIONS, "answers": answers}


def _answer_one(loaded: LoadedQuestion, kind: AnyKind, rows: Sequence[ResultRow]) -> dict[str, Any]:
    axes = loaded.question.axes
    if isinstance(axes, CrowdAxes):
        assert isinstance(kind, CrowdCapacity)
        return crowd_capacity(kind, loaded.scenario, axes.fleet_size, rows)
    grid_rows = len(configurations(loaded.scenario)) * loaded.scenario.repetitions
    grid, searched = rows[:grid_rows], rows[grid_rows:]  # the searches' units come last
    if isinstance(kind, LongestContext):
        return longest_context(searched, loaded.scenario)
    # answers and their figures go up each axis, whatever order the question lists it in
    batches, bandwidths = sorted(axes.batch), sorted(axes.bandwidth_mbps)
    if isinstance(kind, BestMode):
        return best_mode(grid, loaded.scenario, batches, bandwidths, kind.metrics)
    grouped = group(grid, loaded.scenario)
    if isinstance(kind, SmallestFleet):
        return smallest_fleet(kind, grouped, batches, bandwidths)
    assert isinstance(kind, Crossover)
    return crossover(kind, grouped, batches, bandwidths, axes.devices)
