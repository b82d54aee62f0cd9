"""Two runs side by side (``edgetwin compare`` is a thin layer over ``compare``): the
error of the first (predicted) relative to the second (measured), configuration by
configuration."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path

from edgetwin.comparison import (
    COMPARISON_CSV,
    Comparison,
    RunSide,
    check_reference,
    compare_to_reference,
    crowd_load_warning,
    devices_warning,
    emulator_warning,
    jobs_per_run,
    jobs_warning,
    key_label,
    loopback_warning,
    model_warning,
    network_warning,
    passed_on_warnings,
    side_of,
    split_warning,
    write_comparison_csv,
)
from edgetwin.errors import InputError
from edgetwin.output_folder import check_out_folder
from edgetwin.provenance import files_read, recording_reads, write_provenance
from edgetwin.reports.html import comparison_figures, write_comparison_report
from edgetwin.reports.static import StaticFormat
from edgetwin.result_cells import read_results
from edgetwin.results import STATUS_OK, ResultRow, read_status
from edgetwin.row_keys import row_key
from edgetwin.run_warnings import shown_once
from edgetwin.table_files import is_table_file, results_file
from edgetwin.workbench.arguments import (
    flag_argument,
    out_argument,
    path_argument,
    recorded_command,
    static_argument,
    width_argument,
)
from edgetwin.workbench.output import output_folder_if
from edgetwin.workbench.run_context import RunContext, read_run_context
from edgetwin.workbench.static_figures import static_export


def compare(
    predicted: str | Path,
    measured: str | Path,
    *,
    out: str | Path | None = None,
    force: bool = False,
    static: StaticFormat | None = None,
    width: str | None = None,
    command: Sequence[str] | None = None,
) -> Comparison:
    """Join two runs' folders (their ``results.csv``, or ``results.parquet``) on the
    configuration (``measured`` may also be a results table itself, a CSV or a parquet
    file: a published ``measurements.csv``, a run folder's ``results.parquet``): the
    points, the median |error| per metric, the rows of each side left unmatched, and
    warnings (the sides ran on different devices, models or networks, played other faults,
    one is loopback, one runs a stream of jobs, a crowd ``load_ms`` is 0 on one side only),
    then each side's own (its ``warnings.json``), named by side and folder.

    With ``out``, the folder gets ``comparison.csv``, ``comparison.html`` and
    ``provenance.json``, all or nothing (a non-empty ``out`` only with ``force``); with
    ``static`` (``"svg"``, ``"pdf"``, ``"png"``), the page's figure too, as
    ``out/figures/<name>.<static>``, ``width`` wide (a failed export: ``out`` without
    them, then a FiguresNotDrawn). ``command``: what ``provenance.json`` records (the command line;
    ``None``: this call).
    """
    predicted_dir = path_argument(predicted, "predicted")
    measured_dir = path_argument(measured, "measured")
    force = flag_argument(force, "force")
    call = recorded_command(command, "edgetwin.compare", str(predicted_dir), str(measured_dir))
    out_dir = out_argument(out)
    static = static_argument(static, out_dir)
    drawn_at = width_argument(width, static)
    with recording_reads() as reads:
        comparison = _compared(predicted_dir, measured_dir, out_dir, force)
        with (
            static_export(out_dir, static, drawn_at) as export,
            output_folder_if(out_dir, force) as staging,
        ):
            export.result = comparison
            if staging is not None:
                write_comparison_csv(staging / COMPARISON_CSV, comparison)
                title = f"edgetwin: {predicted_dir.name} vs {measured_dir.name}"
                write_comparison_report(staging, title, comparison)
                export.draw(staging, lambda: comparison_figures(comparison))
                write_provenance(staging, command=call, seed=None, inputs=reads)
    return comparison


def _compared(predicted: Path, measured: Path, out: Path | None, force: bool) -> Comparison:
    predicted_table = results_file(predicted)
    measured_table = measured if is_table_file(measured) else results_file(measured)
    predicted_rows = read_results(predicted_table)
    measured_rows = check_reference(measured_table, measured_table, None)
    # each folder's context files, refused where broken as load_results refuses them
    contexts = {
        folder: read_run_context(folder)
        for folder in ((predicted, measured) if measured_table != measured else (predicted,))
    }
    if out is not None:  # refused before comparing, not after
        check_out_folder(out, force, files_read())
    comparison = compare_to_reference(predicted_rows, measured_rows)
    predicted_jobs = jobs_per_run(asdict(row) for row in predicted_rows)
    sides = _side(predicted, contexts), _side(measured, contexts)
    warnings = (
        devices_warning(*sides),
        model_warning(*sides),
        network_warning(*sides),
        emulator_warning(*sides),
        loopback_warning(*sides),
        split_warning(predicted, (asdict(row) for row in predicted_rows), measured, measured_rows),
        jobs_warning(predicted, predicted_jobs, measured, jobs_per_run(measured_rows)),
        crowd_load_warning(comparison),
    )
    if not comparison.points:
        raise _nothing_in_common(predicted_table, predicted_rows, measured_table, measured_rows)
    ours = (w for w in warnings if w is not None)
    return replace(comparison, warnings=tuple(shown_once(ours, passed_on_warnings(*sides))))


def _side(folder: Path, contexts: Mapping[Path, RunContext]) -> RunSide:
    """What ``compare`` warns about of ``folder`` from its context files as read (a table
    given in place of a folder has none)."""
    context = contexts.get(folder)
    if context is None:
        return side_of(folder, None, {})
    return side_of(folder, context.resolved, context.device_names)


def _nothing_in_common(
    predicted_table: Path,
    predicted_rows: Sequence[ResultRow],
    measured_table: Path,
    measured_rows: Sequence[Mapping[str, str]],
) -> InputError:
    """Why two tables gave no point: a side whose every row failed (it said 'no
    configuration in common' of two runs of the same sweep), else no shared configuration."""
    if not predicted_rows:  # the measured side's were checked (check_reference)
        return InputError(predicted_table, None, "a header and no rows: nothing to compare")
    failed = "every row failed (its status says why): nothing to compare"
    if predicted_rows and all(not row.ok for row in predicted_rows):
        return InputError(predicted_table, None, failed)
    if measured_rows and all(read_status(row.get("status")) != STATUS_OK for row in measured_rows):
        return InputError(measured_table, None, failed)
    return InputError(
        measured_table,
        None,
        f"no configuration in common: predicted rows are e.g. {_first_key(predicted_rows)}, "
        f"measured rows e.g. {_first_key(measured_rows)} (a point needs both sides to have "
        "run the same configuration, every part of it)",
    )


def _first_key(rows: Sequence[ResultRow] | Sequence[Mapping[str, str]]) -> str:
    """The configuration of a table's first row, as text (its label in brackets)."""
    row = rows[0]
    return f"[{key_label(row_key(asdict(row) if isinstance(row, ResultRow) else row))}]"
