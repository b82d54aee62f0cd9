"""Held-out errors of a calibration (``edgetwin validate`` is a thin layer over
``validate``): refit without each batch size (or bandwidth, or prompt length) and predict
what was left out. The fitting code (and SciPy) is imported when a validation runs."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgetwin.calibration.held_out import HOLDOUT_NAMES, HoldoutBy, coverage_text
from edgetwin.errors import InputError, option_named, warnings_note
from edgetwin.output_folder import check_out_folder
from edgetwin.progress import Progress, no_progress
from edgetwin.provenance import files_read, recording_reads, write_provenance
from edgetwin.reports.static import StaticFormat
from edgetwin.reports.validation import summarise, validation_figures, write_validation_report
from edgetwin.results import typed_frame
from edgetwin.workbench.arguments import (
    choice_argument,
    flag_argument,
    out_argument,
    path_argument,
    progress_argument,
    recorded_command,
    static_argument,
    width_argument,
)
from edgetwin.workbench.calibrating import spec_kind
from edgetwin.workbench.output import output_folder_if
from edgetwin.workbench.static_figures import static_export

if TYPE_CHECKING:
    import pandas as pd

BY = option_named("--by", "by=")  # how an error names what is left out
# validation.csv's columns and their dtypes in a DataFrame (``held_out``: a batch size, a
# bandwidth or a prompt length, a number either way)
VALIDATION_DTYPES = {
    "metric": "string",
    "point": "string",
    "held_out": "float64",
    "measured": "float64",
    "predicted": "float64",
    "error_pct": "float64",
}


@dataclass(frozen=True)
class Validation:
    """Every held-out prediction (``points``: ``validation.csv``'s rows) and, per metric,
    the count, MAPE, median and max |error| and the intervals' coverage (``summary``:
    ``validation.json``)."""

    points: list[dict[str, Any]]
    summary: dict[str, dict[str, float]]
    # the held-out values that gave a section no points, and why (``edgetwin validate``
    # prints them on stderr)
    warnings: tuple[str, ...] = ()
    by: HoldoutBy = "batch"  # what each refit left out

    def __repr__(self) -> str:
        """A line a notebook can show (the per-metric figures are ``summary``), with how
        many warnings."""
        metrics = ", ".join(self.summary)
        return (
            f"Validation({len(self.points)} held-out points; metrics: {metrics}"
            f"{warnings_note(self.warnings)})"
        )

    def describe(self) -> list[str]:
        """The lines ``edgetwin validate`` prints after its warnings: per metric, the
        held-out points, MAPE, median and max |error| and the intervals' coverage."""
        return [
            f"{metric}: {stats['points']:.0f} held-out points, MAPE {stats['mape_pct']:.1f} %, "
            f"median {stats['median_abs_error_pct']:.1f} %, max {stats['max_abs_error_pct']:.1f} %"
            f"{coverage_text(stats, self.by)}"
            for metric, stats in self.summary.items()
        ]

    def to_pandas(self) -> pd.DataFrame:
        """``points`` as a DataFrame: the columns of ``validation.csv`` (not ``reps``),
        ``metric`` and ``point`` as ``string``, the numbers as ``float64``."""
        return typed_frame(self.points, VALIDATION_DTYPES)


def validate(
    spec: str | Path,
    *,
    by: HoldoutBy = "batch",
    out: str | Path | None = None,
    force: bool = False,
    static: StaticFormat | None = None,
    width: str | None = None,
    progress: Progress | None = no_progress,
    command: Sequence[str] | None = None,
) -> Validation:
    """Leave each ``by`` value out of the fit of ``spec`` in turn (a measured table: batch
    only; traces: batch, bandwidth or prompt) and predict it. With ``out``, the folder gets
    ``validation.csv``, ``validation.json``, ``validation.html`` and ``provenance.json``,
    all or nothing (a non-empty ``out`` only with ``force``); with ``static`` (``"svg"``,
    ``"pdf"``, ``"png"``), the page's figure too, as ``out/figures/<name>.<static>``,
    ``width`` wide (a failed export: ``out`` without them, then a FiguresNotDrawn). ``progress``
    (``edgetwin.progress``) counts the refits. ``command``: what ``provenance.json`` records
    (the command line; ``None``: this call)."""
    from edgetwin.calibration.held_out import nested_coverage, with_coverage
    from edgetwin.calibration.reference_holdout import leave_one_batch_out_table
    from edgetwin.calibration.trace_holdout import leave_one_out

    spec_path = path_argument(spec, "spec")
    choice_argument(by, "by", tuple(HOLDOUT_NAMES))
    force = flag_argument(force, "force")
    call = recorded_command(command, "edgetwin.validate", str(spec_path), f"by={by}")
    out_dir = out_argument(out)
    static = static_argument(static, out_dir)
    drawn_at = width_argument(width, static)
    with recording_reads() as reads:
        kind = spec_kind(spec_path)
        if kind == "android":
            raise InputError(
                spec_path, "kind", "an Android spec is checked by its scenario's tests"
            )
        if kind == "emu":
            problem = "an emu spec is checked on a held-out sweep: benchmarks/bench_emu_loop.py"
            raise InputError(spec_path, "kind", problem)
        if out_dir is not None:  # before seconds of refitting
            check_out_folder(out_dir, force, files_read())
        if kind != "traces" and by != "batch":
            raise InputError(spec_path, BY, "a measured table is validated by batch only")
        if kind == "traces":
            refits = leave_one_out(spec_path, by, progress_argument(progress))
        else:
            refits = leave_one_batch_out_table(spec_path, progress_argument(progress))
        points = refits.points
        if not points:
            raise InputError(spec_path, BY, f"no data to leave out by {by}")
        summary = with_coverage(summarise(points), nested_coverage(points))
        validation = Validation(points, summary, tuple(refits.warnings), by)
        with (
            static_export(out_dir, static, drawn_at) as export,
            output_folder_if(out_dir, force) as staging,
        ):
            export.result = validation
            if staging is not None:
                _write(staging, validation, f"edgetwin validation: {spec_path.name}", by)
                export.draw(staging, lambda: validation_figures(validation.points))
                write_provenance(staging, command=call, seed=None, inputs=reads)
    return validation


def _write(folder: Path, validation: Validation, title: str, by: HoldoutBy) -> None:
    with (folder / "validation.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(
            handle, list(VALIDATION_DTYPES), lineterminator="\n", extrasaction="ignore"
        )
        writer.writeheader()
        writer.writerows(validation.points)
    (folder / "validation.json").write_text(json.dumps(validation.summary, indent=2) + "\n")
    write_validation_report(folder, title, validation.points, validation.summary, held_out_by=by)
