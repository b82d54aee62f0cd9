"""A plan's folder answered from its own files: the sweep's table (``results.csv``), the
question as swept (``question.resolved.yaml``) and the scenario it swept
(``scenario.resolved.yaml``). ``edgetwin plan`` answers from the table it has just
written and ``edgetwin report`` from the table as it finds it, so the same table gives
the same answer and page; a table edited by hand is answered as edited, once its rows are
checked to be the sweep's."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from edgetwin.atomic import write_text_atomic
from edgetwin.configuration import crowd_runs
from edgetwin.errors import InputError
from edgetwin.models import registry
from edgetwin.number_text import counted, exact_text
from edgetwin.plan.answers import answer
from edgetwin.plan.question_file import LoadedQuestion, dump_question, load_question
from edgetwin.plan.questions import CrowdAxes, PlanQuestion, SmallestFleet
from edgetwin.plan.sweep import context_searches, memory_edge_configs
from edgetwin.resolved_scenario import RESOLVED_FILE, dump_resolved
from edgetwin.result_cells import read_results
from edgetwin.results import ResultRow
from edgetwin.scenario_paths import with_absolute_paths
from edgetwin.sim.fleet import build_fleet
from edgetwin.sweep_points import Configuration, configurations
from edgetwin.table_files import RESULTS_CSV

QUESTION_FILE = "question.resolved.yaml"
ANSWER_FILE = "answer.json"
ReportWriter = Callable[[Path, PlanQuestion, dict[str, Any], Sequence[str]], object]
# the columns that say which unit of the sweep a row is of (a crowd row is a job of a run)
DEVICE_KEY = ("strategy", "devices", "batch", "bandwidth_mbps", "prompt_tokens", "output_tokens")
CROWD_KEY = ("strategy", "scheduler", "devices", "bandwidth_mbps")
Key = tuple[tuple[str, object], ...]  # (column, value) pairs, "rep" last


def is_plan_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a plan's answer (or its question as swept)."""
    return any((folder / name).is_file() for name in (QUESTION_FILE, ANSWER_FILE))


def write_swept_question(loaded: LoadedQuestion, out: Path) -> None:
    """``out/scenario.resolved.yaml`` (file paths absolute) and ``out/question.resolved.yaml``,
    the question that sweeps it, from which the folder is answered again."""
    resolved = with_absolute_paths(loaded.scenario, loaded.scenario_path)
    write_text_atomic(out / RESOLVED_FILE, dump_resolved(resolved))
    write_text_atomic(out / QUESTION_FILE, dump_question(loaded.question, RESOLVED_FILE))


def swept_question(folder: Path) -> LoadedQuestion:
    """The question a plan folder answers, loaded from ``folder/question.resolved.yaml``."""
    path = folder / QUESTION_FILE
    if not path.is_file():
        problem = (
            "file not found: the question this plan folder answers (a folder written by an "
            "older edgetwin has none); answer it again: edgetwin plan QUESTION --out FOLDER "
            "--force"
        )
        raise InputError(path, None, problem)
    return load_question(path)


def answer_table(
    loaded: LoadedQuestion, folder: Path, write_report: ReportWriter, warnings: Sequence[str]
) -> dict[str, Any]:
    """The answer to ``loaded`` from ``folder/results.csv``, written as ``answer.json`` and
    the page (``write_report``, its ``warnings`` on top: those of ``warnings.json``), once
    the table's rows are checked to be the sweep's."""
    table = folder / RESULTS_CSV
    rows = read_results(table)
    loaded = _as_swept_then(loaded, rows)
    check_sweep_rows(loaded, rows, table)
    result = answer(loaded, rows)
    write_text_atomic(folder / ANSWER_FILE, json.dumps(result, indent=2) + "\n")
    write_report(folder, loaded.question, result, warnings)
    return result


def _as_swept_then(loaded: LoadedQuestion, rows: Sequence[ResultRow]) -> LoadedQuestion:
    """A smallest_fleet table without one device's rows (written before the question ran
    the baseline beside its strategy, 2026-12-06) is checked and answered as that sweep:
    the answer as it was then, without one device's verdict."""
    one = registry.baseline().name
    if not isinstance(loaded.question.question, SmallestFleet) or any(
        row.strategy == one for row in rows
    ):
        return loaded
    strategies = tuple(s for s in loaded.scenario.strategies if s.name != one)
    scenario = loaded.scenario.model_copy(update={"strategies": strategies})
    return dataclasses.replace(loaded, scenario=scenario)


def check_sweep_rows(loaded: LoadedQuestion, rows: Sequence[ResultRow], table: Path) -> None:
    """The rows read from ``table`` are the sweep's (``sweep_mismatch``); else an
    InputError naming the first line that is not."""
    problem = sweep_mismatch(loaded, rows, lambda index: f"line {index + 2}")
    if problem is not None:
        raise InputError(table, None, f"not the sweep of {QUESTION_FILE}: {problem}")


def sweep_mismatch(
    loaded: LoadedQuestion, rows: Sequence[ResultRow], place: Callable[[int], str]
) -> str | None:
    """None if the rows are the sweep's, unit by unit in sweep order (a device unit's
    repetitions in order; a crowd run's jobs, as many as it had), none missing and none
    more; else what the first row that is not holds (``place`` names it by its index from
    0) or how many rows (runs) there are."""
    crowd = isinstance(loaded.question.axes, CrowdAxes)
    if crowd:
        found = [
            (key, next(group)[0])
            for key, group in itertools.groupby(enumerate(rows), lambda at: _crowd_key(at[1]))
        ]
        expected = _crowd_units(loaded)
    else:
        found = [(_device_key(row), index) for index, row in enumerate(rows)]
        expected = _device_units(loaded)
    for (key, index), wanted in zip(found, expected, strict=False):
        if key != wanted:
            return f"{place(index)} is {_said(key)}; the sweep has {_said(wanted)} there"
    if len(found) != len(expected):
        unit = "run" if crowd else "row"
        return f"{counted(len(found), unit)} where the sweep has {len(expected)}"
    return None


def _device_key(row: ResultRow) -> Key:
    return (*((name, getattr(row, name)) for name in DEVICE_KEY), ("rep", row.rep))


def _crowd_key(row: ResultRow) -> Key:
    return (*((name, getattr(row, name)) for name in CROWD_KEY), ("rep", row.rep))


def _said(key: Key) -> str:
    return ", ".join(
        f"{name} {exact_text(value)}" if isinstance(value, float) else f"{name} {value}"
        for name, value in key
        if value is not None
    )


def _device_units(loaded: LoadedQuestion) -> list[Key]:
    """Each row's key in sweep order: every configuration's repetitions, then the rows of
    each longest-context search (the configurations at the edge of what fits)."""
    scenario = loaded.scenario
    configs = configurations(scenario)
    reps = range(scenario.repetitions)
    keys = [(*_config_key(config), ("rep", rep)) for config in configs for rep in reps]
    if loaded.question.searches_context:
        fleet = build_fleet(scenario, loaded.scenario_path)
        for search in context_searches(configs):
            edge = memory_edge_configs(scenario, fleet, search)
            keys += [(*_config_key(config), ("rep", 0)) for config in edge]
    return keys


def _config_key(config: Configuration) -> Key:
    return tuple((name, getattr(config, name)) for name in DEVICE_KEY)


def _crowd_units(loaded: LoadedQuestion) -> list[Key]:
    """Each run's key in sweep order: fleet size, then ``crowd_runs``' order."""
    axes = loaded.question.axes
    assert isinstance(axes, CrowdAxes)
    runs = crowd_runs(loaded.scenario)
    return [
        (
            ("strategy", run.strategy),
            ("scheduler", run.scheduler),
            ("devices", size),
            ("bandwidth_mbps", run.bandwidth_mbps),
            ("rep", run.rep),
        )
        for size in axes.fleet_size
        for run in runs
    ]
