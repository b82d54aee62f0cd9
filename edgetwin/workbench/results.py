"""A run's results in Python: the rows, the scenario that made them, the output folder's
provenance; as a pandas DataFrame with the columns of ``results.csv`` (pandas is imported
only when a DataFrame is asked for)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from edgetwin.comparison import REFERENCE_FILE, check_reference
from edgetwin.device_names import DEVICES_FILE, write_device_names
from edgetwin.errors import InputError, warnings_note
from edgetwin.provenance import write_provenance, write_provenance_record
from edgetwin.reports import write_report
from edgetwin.reports.html import page_warnings
from edgetwin.resolved_scenario import RESOLVED_FILE, dump_resolved
from edgetwin.result_cells import read_results
from edgetwin.results import ResultRow, results_frame, write_results
from edgetwin.run_failures import failed_summary
from edgetwin.scenario import Scenario
from edgetwin.table_files import RESULTS_CSV, RESULTS_PARQUET, results_file
from edgetwin.workbench.arguments import choice_argument, flag_argument, path_argument
from edgetwin.workbench.output import output_folder
from edgetwin.workbench.reporting import other_command_page
from edgetwin.workbench.run_context import read_run_context
from edgetwin.workbench.run_files import (
    link_checks,
    read_run_files,
    run_warnings,
    write_run_files,
)

if TYPE_CHECKING:
    import pandas as pd

Format = Literal["csv", "parquet", "both"]
FORMATS: tuple[Format, ...] = ("csv", "parquet", "both")


@dataclass(frozen=True)
class Results:
    """The rows of a run (one per configuration and repetition) and what they came from."""

    rows: tuple[ResultRow, ...]
    scenario: Scenario | None = None  # None: a folder without scenario.resolved.yaml
    provenance: dict[str, Any] | None = None  # the output folder's provenance.json
    reference: Path | None = None  # the table the scenario compares against
    # what the run warned about (warnings.json); load_results: what its page shows
    warnings: tuple[str, ...] = ()
    # the runner's files by their path in the run folder (run_files.RUN_FILES, traces/...)
    run_files: Mapping[str, bytes] = field(default_factory=dict)
    # a twin run's device classes and their profiles' names (devices.yaml): what compare
    # knows its devices by once the profile files are gone
    device_names: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        """A line a notebook can show (the rows are ``to_pandas()``'s), with why rows failed
        when some did and how many warnings the run gave."""
        name = "" if self.scenario is None else f" of {self.scenario.name}"
        strategies = ", ".join(dict.fromkeys(row.strategy for row in self.rows))
        failed = f"; {failed_summary(self.rows)}" if not all(r.ok for r in self.rows) else ""
        listed = f"{strategies or 'none'}{failed}{warnings_note(self.warnings)}"
        return f"Results({len(self.rows)} rows{name}: {listed})"

    def to_pandas(self) -> pd.DataFrame:
        """One row per configuration and repetition; the columns of ``results.csv`` in its
        order, typed by ``DTYPES`` (``edgetwin.results.results_frame``)."""
        return results_frame(self.rows)

    def write(self, out: str | Path, *, format: Format = "csv", force: bool = False) -> Path:
        """Write ``results.csv`` (and/or ``results.parquet``), ``scenario.resolved.yaml``,
        ``reference.csv`` (with a reference), ``devices.yaml`` (with device names), the
        runner's files (``run_files``), ``report.html`` and the provenance it came with
        into ``out``, all or nothing (a non-empty ``out`` only with ``force``, replaced
        whole); returns ``out``. Results made in Python without a provenance get one naming
        this call (no inputs)."""
        out = path_argument(out, "out")
        choice_argument(format, "format", FORMATS)
        with output_folder(out, flag_argument(force, "force")) as staging:
            self.write_into(staging, format)
            if self.provenance is not None:
                write_provenance_record(staging, self.provenance)
            else:
                seed = None if self.scenario is None else self.scenario.seed
                call = ["edgetwin.Results.write", str(out)]
                write_provenance(staging, command=call, seed=seed, inputs={})
        return out

    def write_into(self, folder: Path, format: Format, *, runner_wrote: bool = False) -> None:
        """The files of ``write`` in ``folder`` (a staging folder); ``runner_wrote``: the
        runner's files (``run_files``) are there already, written by the run itself."""
        write_results(folder / RESULTS_CSV, self.rows)
        if self.scenario is not None:
            (folder / RESOLVED_FILE).write_text(dump_resolved(self.scenario))
        if self.device_names:
            write_device_names(folder / DEVICES_FILE, self.device_names)
        if self.reference is not None:
            _copy_reference(self.reference, folder / REFERENCE_FILE)
        if not runner_wrote:
            write_run_files(folder, self.run_files)  # before the page, which draws some
        write_report(folder)
        if format != "csv":
            self.to_pandas().to_parquet(folder / RESULTS_PARQUET, index=False)
        if format == "parquet":
            (folder / RESULTS_CSV).unlink()


def _copy_reference(reference: Path, copy: Path) -> None:
    """``reference`` copied to ``copy``; one removed since the run is an InputError."""
    try:
        shutil.copyfile(reference, copy)
    except OSError as exc:
        raise InputError(reference, "reference", f"cannot copy: {exc.strerror}") from None


def load_results(folder: str | Path) -> Results:
    """A run's output folder: ``results.csv`` (or ``results.parquet``), the scenario in
    ``scenario.resolved.yaml``, ``devices.yaml``, ``provenance.json`` and the runner's files
    (``run_files``) when they are there, and the warnings its page shows (those ``edgetwin
    report`` prints); each file read once, and one that does not read refused, as
    ``report`` and ``compare`` refuse it (``read_run_context``)."""
    folder = path_argument(folder, "folder")
    other = other_command_page(folder)
    if other is not None:
        problem = f"holds {other[0]}, which edgetwin {other[1]} writes, and no run's results"
        raise InputError(folder, None, problem)
    rows = read_results(results_file(folder))
    reference = folder / REFERENCE_FILE
    if reference.is_file():  # as edgetwin report checks it: write() draws the comparison
        check_reference(reference, reference, None)
    context = read_run_context(folder)
    files = read_run_files(folder)
    return Results(
        rows=tuple(rows),
        scenario=context.scenario,
        provenance=context.provenance,
        reference=reference.absolute() if reference.is_file() else None,  # write() from anywhere
        warnings=tuple(
            page_warnings(
                rows,
                link_checks(folder, files),
                context.scenario,
                folder / RESOLVED_FILE,
                run_warnings(folder, files),
            )
        ),
        run_files=files,
        device_names=context.device_names,
    )
