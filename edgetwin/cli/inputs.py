"""The loading step of ``edgetwin run``: the scenario and every file it names, checked
before anything runs or is written (``edgetwin run --check`` stops after it)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from edgetwin.comparison import check_reference
from edgetwin.provenance import recording_reads
from edgetwin.scenario import Scenario, dump_resolved, load_scenario, with_absolute_paths
from edgetwin.schema import referenced_file
from edgetwin.sim.crowd.runner import prepare_crowd
from edgetwin.sim.runner import build_fleet


@dataclass(frozen=True)
class RunInputs:
    """A scenario checked with its files: profiles, availability trace, reference table."""

    scenario: Scenario
    path: Path
    reference: Path | None  # the results table to compare against, checked as one
    files: dict[str, str]  # every file read, as opened: its SHA-256

    def resolved_yaml(self) -> str:
        """``scenario.resolved.yaml``: every default filled in, every file path absolute."""
        return dump_resolved(with_absolute_paths(self.scenario, self.path))


def load_run_inputs(path: Path, overrides: Sequence[str] = ()) -> RunInputs:
    """Read, override and validate ``path``, then check every file it names; every
    error is an ``InputError`` naming the file and the field."""
    with recording_reads() as files:
        return _load_run_inputs(path, overrides, files)


def _load_run_inputs(path: Path, overrides: Sequence[str], files: dict[str, str]) -> RunInputs:
    scenario = load_scenario(path, overrides)
    reference = None
    if scenario.reference is not None:
        base = path.resolve().parent
        reference = referenced_file(scenario.reference, base, path, "reference")
        check_reference(reference, path, "reference")
    if scenario.crowd is not None:
        prepare_crowd(scenario, path)  # phone profiles, schedulers, availability trace
    else:
        build_fleet(scenario, path)  # device profiles
    return RunInputs(scenario, path, reference, files)


def add_check_argument(parser: argparse.ArgumentParser) -> None:
    """``--check``: load and check the input file, then stop."""
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the file and every file it names, then stop (nothing runs or is written)",
    )


def add_force_argument(parser: argparse.ArgumentParser) -> None:
    """``--force``: replace a non-empty ``--out`` folder whole (else it is refused)."""
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace a non-empty --out folder whole (without it, one is refused)",
    )


def report_checked(path: Path) -> int:
    """What ``--check`` prints once ``path`` and the files it names loaded; exit status 0."""
    print(f"{path}: ok (checked with every file it names; nothing run)")
    return 0
