"""Policy evaluations (``edgetwin evaluate`` and ``edgetwin evaluate-affinity`` are thin
layers over ``evaluate_adaptive`` and ``evaluate_affinity``; ``edgetwin.evaluate`` is the
package of the evaluators): the adaptive policy against its ground truth, the crowd
schedulers against the offline optimum."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from edgetwin.evaluate.adaptive import evaluate as evaluate_policies
from edgetwin.evaluate.adaptive import evaluation_steps
from edgetwin.evaluate.adaptive_inputs import load_eval_inputs
from edgetwin.evaluate.adaptive_results import Evaluation
from edgetwin.evaluate.affinity import (
    AFFINITY_MODES,
    AffinityEvaluation,
    AffinityMode,
    load_affinity_settings,
)
from edgetwin.evaluate.affinity import evaluate_affinity as evaluate_schedulers
from edgetwin.progress import Progress, no_progress
from edgetwin.provenance import recording_reads, write_provenance
from edgetwin.reports.adaptive import evaluation_figures, write_evaluation
from edgetwin.reports.affinity import affinity_figures, write_affinity_report
from edgetwin.reports.static import StaticFormat
from edgetwin.workbench.arguments import (
    choice_argument,
    flag_argument,
    out_argument,
    overrides_argument,
    path_argument,
    progress_argument,
    recorded_command,
    static_argument,
    width_argument,
)
from edgetwin.workbench.output import output_folder_if
from edgetwin.workbench.static_figures import static_export


def evaluate_adaptive(
    spec: str | Path,
    *,
    overrides: Sequence[str] = (),
    out: str | Path | None = None,
    force: bool = False,
    static: StaticFormat | None = None,
    width: str | None = None,
    progress: Progress | None = no_progress,
    command: Sequence[str] | None = None,
) -> Evaluation:
    """Score the adaptive policy of an evaluation file (``*.eval.yaml``): its performance
    map, the ground truth at the held-out conditions, each policy's accuracy and regret.

    ``overrides`` are ``--set``-style items on the evaluation file. With ``out``, the
    folder gets what ``edgetwin evaluate --out`` writes (``evaluation.json``, the map, the
    page, ``provenance.json``), all or nothing; a non-empty ``out`` only with ``force``;
    with ``static`` (``"svg"``, ``"pdf"``, ``"png"``), the page's figures too, as
    ``out/figures/<name>.<static>`` (``width`` wide) (a failed export: ``out`` without them, then a
    FiguresNotDrawn). ``progress`` and ``command`` as for ``run``.
    """
    spec_path = path_argument(spec, "spec")
    items = tuple(overrides_argument(overrides))
    call = recorded_command(command, "edgetwin.evaluate_adaptive", str(spec_path), *items)
    out_dir, force = out_argument(out), flag_argument(force, "force")
    static = static_argument(static, out_dir)
    drawn_at = width_argument(width, static)
    shows = progress_argument(progress)
    with recording_reads() as reads:
        inputs = load_eval_inputs(spec_path, items)
        steps = evaluation_steps(inputs.scenario, inputs.settings, inputs.map_table)
        with (
            static_export(out_dir, static, drawn_at) as export,
            output_folder_if(out_dir, force) as staging,
            shows(f"evaluate {spec_path.name}, twin sweeps", steps) as advance,
        ):
            result = evaluate_policies(
                inputs.scenario,
                inputs.scenario_path,
                inputs.settings,
                inputs.map_table,
                advance,
                truth_rows=inputs.truth_rows,
                truth_table=inputs.truth_table,
                settings_path=spec_path,
            )
            export.result = result
            if staging is not None:
                write_evaluation(staging, result)
                export.draw(staging, lambda: evaluation_figures(result))
                write_provenance(staging, command=call, seed=inputs.scenario.seed, inputs=reads)
    return result


def evaluate_affinity(
    spec: str | Path,
    *,
    overrides: Sequence[str] = (),
    mode: AffinityMode | None = None,
    out: str | Path | None = None,
    force: bool = False,
    static: StaticFormat | None = None,
    width: str | None = None,
    progress: Progress | None = no_progress,
    command: Sequence[str] | None = None,
) -> AffinityEvaluation:
    """Run every crowd scheduler of an affinity evaluation file on each of its instances
    (in the crowd twin, or the emulator as root) and score it against the instance's
    offline optimum. ``overrides`` are ``--set``-style items on the evaluation file;
    ``mode`` overrides the file's. With ``out``, what
    ``edgetwin evaluate-affinity --out`` writes, all or nothing (with ``static``, the
    page's figures too, as ``out/figures/<name>.<static>`` (``width`` wide); a failed
    export: ``out`` without them, then a FiguresNotDrawn). ``progress`` and
    ``command`` as for ``run``.
    """
    spec_path = path_argument(spec, "spec")
    items = tuple(overrides_argument(overrides))
    if mode is not None:
        choice_argument(mode, "mode", AFFINITY_MODES)
    given = () if mode is None else (f"mode={mode}",)
    call = recorded_command(command, "edgetwin.evaluate_affinity", str(spec_path), *items, *given)
    out_dir, force = out_argument(out), flag_argument(force, "force")
    static = static_argument(static, out_dir)
    drawn_at = width_argument(width, static)
    shows = progress_argument(progress)
    with recording_reads() as reads:
        settings, scenarios = load_affinity_settings(spec_path, mode, overrides=items)
        seeds = {scenario.seed for scenario, _ in scenarios}
        seed = seeds.pop() if len(seeds) == 1 else None  # None: the instances differ
        label = f"evaluate-affinity {spec_path.name} ({settings.mode}), instances"
        with (
            static_export(out_dir, static, drawn_at) as export,
            output_folder_if(out_dir, force) as staging,
        ):
            with shows(label, len(scenarios)) as advance:
                result = evaluate_schedulers(settings, scenarios, advance)
            export.result = result
            if staging is not None:
                write_affinity_report(staging, result)
                export.draw(staging, lambda: affinity_figures(result))
                write_provenance(staging, command=call, seed=seed, inputs=reads)
    return result
