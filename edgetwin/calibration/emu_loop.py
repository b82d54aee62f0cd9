"""Closing the loop: calibrate the twin from the emulator on one sweep, check it on another.

1. the emulator runs sweep A (``fit``) -> ``OUT/emu_fit`` (results, link check, scenario);
2. this machine's profile is fitted from that folder alone -> ``OUT/machine/profile.yaml``;
3. the twin runs sweep B (``check``) with that profile -> ``OUT/twin_check``;
4. the emulator runs sweep B -> ``OUT/emu_check`` (after the fit: the fit cannot see it);
5. twin vs emulator on B, configuration by configuration (the median of each side's
   repetitions, as ``edgetwin compare``) -> ``OUT/comparison.csv``, per-metric medians;
   also against each configuration's fastest repetition (the least disturbed by other
   load on the machine) -> ``OUT/comparison_fastest.csv``.

Needs root and Mininet (the emulator). The twin's side is deterministic: the
same emulator folder gives the same profile and the same predictions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from edgetwin.calibration.fit_emu import calibrate_machine_from_emu
from edgetwin.comparison import (
    COMPARISON_CSV,
    Comparison,
    compare_to_reference,
    write_comparison_csv,
)
from edgetwin.links import LINK_CHECK_FILE
from edgetwin.profile import DeviceProfile
from edgetwin.resolved_scenario import RESOLVED_FILE, dump_resolved
from edgetwin.results import ResultRow, write_results
from edgetwin.row_keys import RowKey, row_key
from edgetwin.scenario import Scenario, load_scenario
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.runner import run_scenario
from edgetwin.table_files import RESULTS_CSV, read_table


@dataclass(frozen=True)
class LoopSettings:
    """Emulator settings of both sweeps (see ``run_emu``)."""

    link_check_s: int | None = None  # None: each scenario's emulator.link_check_s


@dataclass
class LoopResult:
    """The fitted profile, twin vs emulator on the check sweep (each configuration's
    median repetition, and its fastest), seconds per step, and the emulator's warnings
    (a ``network.schedule`` step its launches ended before), each after its folder."""

    profile: DeviceProfile
    check: Comparison
    check_fastest: Comparison
    wall_s: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def close_loop(
    fit: Path,
    check: Path,
    out: Path,
    settings: LoopSettings = LoopSettings(),
) -> LoopResult:
    """Steps 1-5 above."""
    wall_s: dict[str, float] = {}
    start = time.perf_counter()

    def lap(step: str) -> None:
        nonlocal start
        wall_s[step] = round(time.perf_counter() - start, 1)
        start = time.perf_counter()

    warnings = run_emulator(load_scenario(fit, ["mode=emu"]), fit, out / "emu_fit", settings)
    lap("emulator, fit sweep")
    command = f"edgetwin calibrate-machine --emu {out / 'emu_fit'} --out {out / 'machine'}"
    (out / "machine").mkdir(parents=True, exist_ok=True)
    profile = calibrate_machine_from_emu(out / "emu_fit", out / "machine", command)
    lap("calibration")
    profile_path = (out / "machine" / "profile.yaml").resolve()
    twin = load_scenario(check, ["mode=twin", f"devices.0.profile={profile_path}"])
    twin_rows = [o.row for o in run_scenario(twin, build_fleet(twin, check))]
    _write_run(out / "twin_check", twin, twin_rows)
    lap("twin, check sweep")
    warnings += run_emulator(load_scenario(check, ["mode=emu"]), check, out / "emu_check", settings)
    lap("emulator, check sweep")
    emulated = read_table(out / "emu_check" / RESULTS_CSV)
    comparison = compare_to_reference(twin_rows, emulated)
    fastest = compare_to_reference(twin_rows, fastest_repetitions(emulated))
    write_comparison_csv(out / COMPARISON_CSV, comparison)
    write_comparison_csv(out / "comparison_fastest.csv", fastest)
    return LoopResult(profile, comparison, fastest, wall_s, warnings)


def run_emulator(scenario: Scenario, path: Path, out: Path, settings: LoopSettings) -> list[str]:
    """What ``edgetwin run --mode emu`` writes, without the report: results, link check,
    resolved scenario (as played: ``EmuRun.played``); its warnings of what never played,
    each after ``out``'s name."""
    from edgetwin.emu.mininet.checks import write_link_checks
    from edgetwin.emu.mininet.runner import run_emu

    run = run_emu(scenario, path, link_check_s=settings.link_check_s)
    _write_run(out, run.played(scenario), run.rows)
    write_link_checks(out / LINK_CHECK_FILE, run.links)
    return [f"{out.name}: {warning}" for warning in run.warnings]


def _write_run(out: Path, scenario: Scenario, rows: list[ResultRow]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_results(out / RESULTS_CSV, rows)
    (out / RESOLVED_FILE).write_text(dump_resolved(scenario))


def fastest_repetitions(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """Per configuration, the row with the least ``total_ms``."""
    fastest: dict[RowKey, dict[str, str]] = {}
    for row in rows:
        key = row_key(row)
        if key not in fastest or float(row["total_ms"]) < float(fastest[key]["total_ms"]):
            fastest[key] = row
    return list(fastest.values())
