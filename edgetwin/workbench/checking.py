"""``edgetwin.check``: what ``--check`` does for each command that takes it (``run``,
``plan``, ``evaluate``, ``evaluate-affinity``), from Python: the input file, with every file
it names, and ``out`` as the command would check them, nothing run or written."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from edgetwin.errors import InputError
from edgetwin.evaluate.adaptive_inputs import load_eval_inputs
from edgetwin.evaluate.affinity import AFFINITY_MODES, load_affinity_settings
from edgetwin.file_kinds import KINDS, Kind, kind_of_file
from edgetwin.output_folder import check_out_folder
from edgetwin.plan.question_file import load_question
from edgetwin.provenance import recording_reads
from edgetwin.scenario import RunMode, Scenario
from edgetwin.workbench import running
from edgetwin.workbench.arguments import (
    choice_argument,
    flag_argument,
    overrides_argument,
    path_argument,
)
from edgetwin.workbench.planning import check_plan_out


def check(
    scenario: str | Path | Scenario,
    *,
    mode: RunMode | None = None,
    seed: int | None = None,
    overrides: Sequence[str] = (),
    trace: bool = False,
    out: str | Path | None = None,
    force: bool = False,
) -> list[str]:
    """Check an input file without running it, as its command's ``--check`` does: a
    scenario (a file or a Scenario, ``edgetwin run --check``: ``running.check``), a plan
    question (``edgetwin plan --check``), an evaluation of the adaptive policy (``edgetwin
    evaluate --check``) or of crowd schedulers (``edgetwin evaluate-affinity --check``,
    which takes ``mode``), the file's kind telling which; ``overrides`` are ``--set``'s on
    it, and ``out`` (with ``force``) is checked as the command checks its ``--out``. Returns
    a scenario run's warnings (none for the others); what the command would refuse is an
    ``InputError`` naming the file and the field (an argument that the file's command does
    not take, the argument)."""
    items = tuple(overrides_argument(overrides))
    force = flag_argument(force, "force")
    out_dir = None if out is None else path_argument(out, "out")
    with recording_reads() as reads:
        kind = None if isinstance(scenario, Scenario) else _kind(scenario)
        if kind in (None, "scenario"):
            warnings = running.check(scenario, mode=mode, seed=seed, overrides=items, trace=trace)
        else:
            path = path_argument(scenario, "scenario")
            _not_taken(path, kind, seed=seed, trace=trace, mode=mode)
            warnings = []
            if kind == "plan":
                load_question(path, items)
            elif kind == "evaluation":
                load_eval_inputs(path, items)
            else:
                chosen = None if mode is None else choice_argument(mode, "mode", AFFINITY_MODES)
                load_affinity_settings(path, chosen, machine=False, overrides=items)
        if out_dir is not None and kind == "plan":
            check_plan_out(out_dir, force)
        elif out_dir is not None:
            check_out_folder(out_dir, force, tuple(reads))
    return warnings


def _kind(scenario: str | Path) -> Kind | None:
    """The kind of file ``scenario`` names; a calibration spec or a profile (no ``--check``)
    is refused as ``run`` refuses it, naming its command."""
    path = path_argument(scenario, "scenario")
    kind = kind_of_file(path)
    if kind in ("calibration", "profile"):
        return "scenario"  # the scenario's loader says what it is and what reads it
    return kind


def _not_taken(path: Path, kind: Kind, **given: object) -> None:
    """An ``InputError`` naming the first argument given that ``kind``'s command does not
    take (``mode``: only a scenario's and an affinity evaluation's)."""
    takes = {"mode"} if kind == "affinity" else set()
    for name, value in given.items():
        if name not in takes and value not in (None, False):
            problem = (
                f"{path} is {KINDS[kind].noun}, whose check takes no {name} (a scenario's does)"
            )
            raise InputError(None, name, problem)
