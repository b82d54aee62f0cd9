"""edgetwin: a digital twin and an emulator for splitting Transformers across edge devices.

The Python API (docs/api.md) is imported on first use, so that ``import edgetwin`` (and a
worker process, which imports only what it runs) stays light::

    import edgetwin
    results = edgetwin.run("scenarios/prism_jetson.yaml")
    frame = results.to_pandas()
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

__all__ = [
    "FIT_WARNINGS",
    "AffinityEvaluation",
    "AtBoundWarning",
    "Comparison",
    "DeviceProfile",
    "EmulatorNotCleaned",
    "Evaluation",
    "FiguresNotDrawn",
    "InputError",
    "Leftovers",
    "NoHeldOutWarning",
    "NotPinnedWarning",
    "PhoneProfile",
    "PlanOutcome",
    "PoorFitWarning",
    "Report",
    "ResultRow",
    "Results",
    "RunFailed",
    "Scenario",
    "SkippedRefitWarning",
    "UnitWarning",
    "Validation",
    "at_bound",
    "calibrate",
    "calibrate_machine",
    "check",
    "compare",
    "emu_cleanup",
    "evaluate_adaptive",
    "evaluate_affinity",
    "init",
    "load_results",
    "load_scenario",
    "not_held_out",
    "poorly_fitted",
    "report",
    "run",
    "run_plan",
    "validate",
]


def __getattr__(name: str) -> Any:
    """``edgetwin.run`` and the rest of the API, imported from ``edgetwin.workbench``, and
    a module of the package, ``edgetwin.progress`` or ``edgetwin.errors`` (as docs/api.md
    names them), imported on its first use as ``import edgetwin.progress`` would; both by
    name, not by an import statement: the workers import this package, and the layering
    contract sees every import statement."""
    if name in __all__:
        return getattr(importlib.import_module("edgetwin.workbench"), name)
    if name == "__version__":  # the installed package's, as ``edgetwin --version`` says
        return importlib.import_module("edgetwin.provenance").edgetwin_version()
    if name.isidentifier() and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'edgetwin' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The API's names (a notebook's completion offers them before their first use)."""
    return sorted(__all__)
