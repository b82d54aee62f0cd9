"""The Python API (docs/api.md): run a scenario, load a run's folder, results as a
pandas DataFrame, its report again, fit and validate a profile, compare two runs, evaluate
policies, answer a plan. ``edgetwin.run`` and the others are these, imported on first use."""

from __future__ import annotations

from edgetwin.errors import InputError
from edgetwin.scenario import Scenario
from edgetwin.workbench.calibrating import calibrate
from edgetwin.workbench.comparing import compare
from edgetwin.workbench.evaluating import evaluate_adaptive, evaluate_affinity
from edgetwin.workbench.inputs import load_scenario
from edgetwin.workbench.planning import run_plan
from edgetwin.workbench.reporting import Report, report
from edgetwin.workbench.results import Results, load_results
from edgetwin.workbench.running import run
from edgetwin.workbench.validating import Validation, validate

__all__ = [
    "InputError",
    "Report",
    "Results",
    "Scenario",
    "Validation",
    "calibrate",
    "compare",
    "evaluate_adaptive",
    "evaluate_affinity",
    "load_results",
    "load_scenario",
    "report",
    "run",
    "run_plan",
    "validate",
]
