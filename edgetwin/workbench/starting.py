"""A commented file to start from (``edgetwin init`` is a thin layer over ``init``): a
scenario, an evaluation, a plan question or a decoder's, one that loads and runs as written."""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path
from typing import Literal, get_args

from edgetwin.atomic import write_text_atomic
from edgetwin.errors import FORCE_OPTION, InputError
from edgetwin.output_folder import output_kind, why_not_written
from edgetwin.workbench.arguments import choice_argument, flag_argument, path_argument

# in the order the help and the README give them
Kind = Literal["scenario", "eval", "plan", "plan-llm"]
KINDS: tuple[Kind, ...] = get_args(Kind)
# kind -> (template in workbench/templates, default file name)
TEMPLATES: dict[Kind, tuple[str, str]] = {
    "scenario": ("scenario.yaml", "scenario.yaml"),
    "eval": ("eval.yaml", "evaluation.eval.yaml"),
    "plan": ("plan.yaml", "question.plan.yaml"),
    "plan-llm": ("plan_llm.yaml", "llm.plan.yaml"),
}
assert tuple(TEMPLATES) == KINDS, "a template for each kind, in its order"


def template_text(kind: Kind) -> str:
    """The commented template of ``kind``."""
    return files("edgetwin.workbench").joinpath("templates", TEMPLATES[kind][0]).read_text()


def init(kind: Kind, path: str | Path | None = None, *, force: bool = False) -> Path:
    """Write the template of ``kind`` (``"scenario"``, ``"eval"``, ``"plan"``, ``"plan-llm"``) to
    ``path``: a file, or a folder (an existing one, or a name ending in ``/``) to write the
    default name into (``None``: the default name in the current folder). An existing file
    is kept unless ``force``. Returns the path written."""
    default_name = TEMPLATES[choice_argument(kind, "kind", KINDS)][1]
    force = flag_argument(force, "force")
    target = Path(default_name) if path is None else path_argument(path, "path")
    if path is not None and (str(path).endswith(os.sep) or output_kind(target) == "folder"):
        target = target / default_name
    found = output_kind(target)
    if found is not None and not force:
        raise InputError(target, None, f"exists; pass {FORCE_OPTION} to overwrite it")
    if found not in (None, "file"):
        raise InputError(target, None, "exists and is not a file")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(target, template_text(kind))
    except OSError as exc:
        raise InputError(target, None, f"cannot write: {why_not_written(target, exc)}") from None
    return target
