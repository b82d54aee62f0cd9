"""Run a question: resume the sweep from its journal, answer, write the folder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgetwin.errors import OUT_OPTION, InputError, warnings_note
from edgetwin.network_spec import BandwidthStep
from edgetwin.plan.answer_text import describe
from edgetwin.plan.executors import Executor
from edgetwin.plan.folder import (
    ReportWriter,
    answer_table,
    sweep_mismatch,
    write_swept_question,
)
from edgetwin.plan.journal import Journal, fingerprint
from edgetwin.plan.question_file import LoadedQuestion, unrun_devices
from edgetwin.plan.sweep import ConfigResult, files_digest, payload_for
from edgetwin.progress import Steps, no_progress
from edgetwin.provenance import code_digest
from edgetwin.results import ResultRow, results_frame, write_results
from edgetwin.run_warnings import write_warnings_file
from edgetwin.sim.fleet import unplayed_in_twin
from edgetwin.sim.network import unplayed_schedule
from edgetwin.sim.runner import warms_up
from edgetwin.table_files import RESULTS_CSV

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class PlanOutcome:
    """What a plan run produced: rows in sweep order, the answer, how much it ran now."""

    rows: list[ResultRow]
    answer: dict[str, Any]
    configurations: int
    ran_now: int
    # settings the twin's sweeps do not play (packet loss), schedule steps its runs ended before
    warnings: tuple[str, ...] = ()

    def describe(self) -> list[str]:
        """The answer in a few lines of text, as ``edgetwin plan`` prints it."""
        return describe(self.answer)

    def to_pandas(self) -> pd.DataFrame:
        """The sweep's rows as a DataFrame, as ``Results.to_pandas()`` gives a run's."""
        return results_frame(self.rows)

    def __repr__(self) -> str:
        """A line a notebook can show (the answer is ``answer``), with how many warnings."""
        return (
            f"PlanOutcome({len(self.rows)} rows of {self.configurations} configurations, "
            f"{self.ran_now} run now{warnings_note(self.warnings)})"
        )


def journal_for(loaded: LoadedQuestion, out: Path) -> Journal:
    """The journal of this question's sweep in ``out/partial``: its fingerprint is the swept
    scenario's and the bytes of the files its runs read (a profile edited between an
    interrupted sweep and its rerun is a different sweep), beside the code's digest."""
    identity = payload_for(loaded).identity + files_digest(loaded)
    return Journal(out, fingerprint(identity), code_digest())


def sweep_rows(
    loaded: LoadedQuestion,
    journal: Journal,
    executor: Executor,
    steps: Steps | None = None,
    label: str = "sweep",
) -> tuple[list[ResultRow], list[ConfigResult], list[tuple[BandwidthStep, ...]]]:
    """Rows of every unit of the sweep in index order (device sweeps: ``run_scenario``
    order), the units that ran now (the others came from the journal), and the unplayed
    steps of every unit's runs that ran, the journal's too (``unplayed_schedule``'s).
    ``steps(label, units to run)`` is told each unit as it ends, by the payload's
    ``label``; a resumed sweep's label says so once (``plan q, resumed 40 of 120 units``)."""
    payload = payload_for(loaded)
    total = payload.units()
    done = journal.finished()
    missing = [i for i in range(total) if i not in done]
    ran_now: list[ConfigResult] = []
    if done:
        label += f", resumed {total - len(missing)} of {total} units"
    shows = no_progress if steps is None else steps
    try:
        with shows(label, len(missing)) as advance:

            def record(result: ConfigResult) -> None:
                journal.append(result)
                done[result.index] = result
                ran_now.append(result)
                if steps is not None:  # no label to build for nobody
                    advance(payload.label(result.index))

            executor.run(payload, missing, record)
    finally:
        journal.close()
    rows = [row for i in range(total) for row in done[i].rows]
    return rows, ran_now, [steps for i in range(total) for steps in done[i].unplayed]


def check_journaled(loaded: LoadedQuestion, rows: list[ResultRow], journal: Journal) -> None:
    """The rows of a sweep (resumed from ``journal``, and run now) are the sweep's
    (``sweep_mismatch``): else an InputError naming the journal, whose lines were edited."""
    problem = sweep_mismatch(loaded, rows, lambda index: f"row {index + 1}")
    if problem is not None:
        problem = (
            f"not the rows of this sweep: {problem}; remove {journal.folder} or use another "
            f"{OUT_OPTION}"
        )
        raise InputError(journal.rows_path, None, problem)


def start_warnings(loaded: LoadedQuestion) -> list[str]:
    """What a plan warns of before it sweeps (``edgetwin plan --check`` prints them too): a
    ``set`` count that sizes devices no run takes (unless the file's own axes run them:
    narrowed by the caller), and the settings the twin does not play
    (``network.loss_pct``, a token bucket no board bursts from)."""
    return [
        *unrun_devices(loaded),
        *unplayed_in_twin(loaded.scenario, loaded.scenario_path),
    ]


def run_plan(
    loaded: LoadedQuestion,
    out: Path,
    executor: Executor,
    write_report: ReportWriter,
    steps: Steps | None = None,
    finish: Callable[[PlanOutcome], None] | None = None,
) -> PlanOutcome:
    """Sweep (resuming; ``steps`` as ``sweep_rows``', labelled ``plan <question>``), then
    write ``results.csv``, ``scenario.resolved.yaml``, ``question.resolved.yaml`` and
    ``warnings.json`` (what the plan warned about, the journal's runs counted too), and
    answer from that table: ``answer.json`` and the report (``write_report``, e.g.
    reports' ``plan.html``) in ``out``, then ``finish`` the caller's last files (its
    figures, ``provenance.json``); the journal is removed at the end, so that a plan
    stopped before it is done leaves a folder that says so (its journal: a rerun ends it)."""
    if out.exists() and not out.is_dir():
        raise InputError(out, None, f"{OUT_OPTION} exists and is not a folder")
    journal = journal_for(loaded, out)
    try:
        label = f"plan {loaded.question.name}"
        rows, ran_now, unplayed = sweep_rows(loaded, journal, executor, steps, label)
        check_journaled(loaded, rows, journal)  # before anything is written into out
        warnings = (
            *start_warnings(loaded),
            *unplayed_schedule(unplayed, warms_up(loaded.scenario)),  # resumed units too
        )
        write_results(out / RESULTS_CSV, rows)
        write_swept_question(loaded, out)
        write_warnings_file(out, warnings)  # for the page and edgetwin report
        result = answer_table(loaded, out, write_report, warnings)  # as report answers it
        outcome = PlanOutcome(rows, result, payload_for(loaded).units(), len(ran_now), warnings)
        if finish is not None:
            finish(outcome)
        journal.remove()
    finally:
        journal.unlock()
    return outcome
