"""The Python API (docs/api.md): run a scenario, load a run's folder, results as a
pandas DataFrame, its report again, fit and validate a profile (and check its fit), profile
this machine, compare two runs, evaluate policies, answer a plan, start a file from a
template, clean up after killed runs; and the types they return.
``edgetwin.run`` and the others are these, imported on first use."""

from __future__ import annotations

from edgetwin.calibration.fit_check import (
    FIT_WARNINGS,
    AtBoundWarning,
    NoHeldOutWarning,
    NotPinnedWarning,
    PoorFitWarning,
    SkippedRefitWarning,
    UnitWarning,
    at_bound,
    not_held_out,
    poorly_fitted,
)
from edgetwin.comparison import Comparison
from edgetwin.emu.mininet.net import Leftovers
from edgetwin.errors import InputError, RunFailed
from edgetwin.evaluate.adaptive_results import Evaluation
from edgetwin.evaluate.affinity import AffinityEvaluation
from edgetwin.phone_profile import PhoneProfile
from edgetwin.plan.run import PlanOutcome
from edgetwin.profile import DeviceProfile
from edgetwin.results import ResultRow
from edgetwin.scenario import Scenario
from edgetwin.workbench.calibrating import calibrate
from edgetwin.workbench.checking import check
from edgetwin.workbench.cleaning import EmulatorNotCleaned, emu_cleanup
from edgetwin.workbench.comparing import compare
from edgetwin.workbench.evaluating import evaluate_adaptive, evaluate_affinity
from edgetwin.workbench.inputs import load_scenario
from edgetwin.workbench.machine import calibrate_machine
from edgetwin.workbench.planning import run_plan
from edgetwin.workbench.reporting import Report, report
from edgetwin.workbench.results import Results, load_results
from edgetwin.workbench.running import run
from edgetwin.workbench.starting import init
from edgetwin.workbench.static_figures import FiguresNotDrawn
from edgetwin.workbench.validating import Validation, validate

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
