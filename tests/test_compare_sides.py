"""What ``edgetwin compare`` says of each side beyond its rows: the side's own warnings
(``warnings.json``), the faults it played, and a crowd ``load_ms`` that one side reads
as 0."""

from __future__ import annotations

import csv
import html
import shutil
from pathlib import Path

import pytest

import edgetwin
from edgetwin.cli import main
from edgetwin.resolved_scenario import RESOLVED_FILE, dump_resolved
from edgetwin.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
CROWD = ROOT / "scenarios" / "emu_crowdio.yaml"
JETSON = ROOT / "scenarios" / "prism_jetson.yaml"
KILL = "emulator.faults=[{kind: kill_worker, host: 1, at_s: 0.6}]"


def _twin(out: Path, *overrides: str) -> Path:
    """A twin run of the tiny crowd scenario (4 jobs, about a second)."""
    sets = [arg for override in overrides for arg in ("--set", override)]
    assert main(["run", str(CROWD), "--mode", "twin", "--out", str(out), "--quiet", *sets]) == 0
    return out


def _as_emulator_run(twin: Path, out: Path, *overrides: str) -> Path:
    """``twin``'s rows in a folder whose resolved scenario says mode emu with ``overrides``:
    the files ``compare`` reads of an emulator run (no emulator runs in unit tests)."""
    shutil.copytree(twin, out)
    (out / "warnings.json").unlink(missing_ok=True)
    scenario = load_scenario(CROWD, ["mode=emu", *overrides])
    (out / RESOLVED_FILE).write_text(dump_resolved(scenario))
    return out


@pytest.mark.timeout(60)
def test_compare_passes_on_each_sides_warnings_named_by_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A twin run whose scenario has a fault warned that the twin plays none; a comparison
    built on it said nothing of it. Each warning of each side's warnings.json is now among
    the comparison's, once, named by side and folder, on stderr and on the page; a folder
    without the file adds none."""
    warned = _twin(tmp_path / "warned", KILL)
    plain = _twin(tmp_path / "plain")
    (own,) = edgetwin.load_results(warned).warnings
    assert "emulator.faults" in own
    capsys.readouterr()
    out = tmp_path / "cmp"
    assert main(["compare", str(warned), str(plain), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    passed_on = f"predicted {warned} warned: {own}"
    assert err.count(passed_on) == 1
    page = (out / "comparison.html").read_text()
    assert html.escape(passed_on) in page
    comparison = edgetwin.compare(plain, warned)
    assert comparison.warnings == (f"measured {warned} warned: {own}",)
    assert edgetwin.compare(plain, _twin(tmp_path / "again")).warnings == ()


@pytest.mark.timeout(60)
def test_compare_warns_when_the_sides_played_other_faults(tmp_path: Path) -> None:
    """An emulator run that killed a worker, compared with a twin (which plays no fault,
    whatever its file says), was joined without a word; the same faults on both emulator
    sides are no difference."""
    twin = _twin(tmp_path / "twin")
    emu = _as_emulator_run(twin, tmp_path / "emu", KILL)
    (warning,) = [w for w in edgetwin.compare(twin, emu).warnings if "faults" in w]
    assert "other faults or task delays (faults none vs kill_worker host 1 at 0.6 s)" in warning
    assert str(twin) in warning and str(emu) in warning
    twin_with_file = _twin(tmp_path / "twin_kill", KILL)
    assert any("faults none vs" in w for w in edgetwin.compare(twin_with_file, emu).warnings)
    same = _as_emulator_run(twin, tmp_path / "emu_same", KILL)
    assert not [w for w in edgetwin.compare(same, emu).warnings if "faults" in w]
    slowed = _as_emulator_run(twin, tmp_path / "emu_slowed", KILL, "emulator.task_delay_ms=200")
    (delay,) = [w for w in edgetwin.compare(same, slowed).warnings if "faults" in w]
    assert "(task_delay_ms 0 vs 200)" in delay


@pytest.mark.timeout(60)
def test_a_crowd_load_ms_read_as_0_on_one_side_is_said_and_a_measured_0_counted(
    tmp_path: Path,
) -> None:
    """The twin's emu_crowdio rows read load_ms 0: their last input runs second on every
    phone, behind the task that took each load. The emulator's measured 485, 492, 0 and
    95 ms, and compare printed 'load_ms: median |error| 100.0 % over 3 points', the
    measured 0 dropped unsaid."""
    twin = _twin(tmp_path / "twin")
    measured = tmp_path / "measured.csv"
    with (twin / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [float(r["load_ms"]) for r in rows] == [0, 0, 0, 0]
    for row, load_ms in zip(rows, ("485", "492", "0", "95"), strict=True):
        row["load_ms"], row["mode"] = load_ms, "emu"
    with measured.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    comparison = edgetwin.compare(twin, measured)
    (line,) = [x for x in comparison.describe() if x.startswith("load_ms")]
    assert "over 3 points" in line and "1 more measured 0" in line
    (warning,) = [w for w in comparison.warnings if "load_ms" in w]
    assert "predicted 0 at 3 of 4 points" in warning and "came last" in warning


@pytest.mark.timeout(120)
def test_a_loss_only_the_emulator_plays_is_no_other_network_between_twin_runs(
    tmp_path: Path,
) -> None:
    """Two twin runs, one with ``loss_pct`` set, played the same network (a twin drops no
    packet): compare said they ran other networks (``loss_pct 1 vs 0``)."""
    small = ["sweeps=[{batch: [1]}]"]
    edgetwin.run(JETSON, overrides=[*small, "network.loss_pct=1"], out=tmp_path / "lossy")
    edgetwin.run(JETSON, overrides=small, out=tmp_path / "plain")
    comparison = edgetwin.compare(tmp_path / "lossy", tmp_path / "plain")
    assert not any("other networks" in w for w in comparison.warnings)
    emulated = _as_emulator_run(_twin(tmp_path / "crowd"), tmp_path / "emu", "network.loss_pct=1")
    warnings = edgetwin.compare(tmp_path / "crowd", emulated).warnings
    assert any("other networks (loss_pct 0 vs 1)" in w for w in warnings)


@pytest.mark.timeout(60)
def test_a_congestion_control_is_another_network_between_emulator_runs_alone(
    tmp_path: Path,
) -> None:
    """An emulator run records the congestion control its hosts used, which a twin run
    ignores: compared with a twin it is no other network (it was: ``congestion_control
    none vs bbr`` on every such comparison); two emulator runs with other ones ran other
    networks."""
    twin = _twin(tmp_path / "twin")
    bbr = _as_emulator_run(twin, tmp_path / "bbr", "network.congestion_control=bbr")
    cubic = _as_emulator_run(twin, tmp_path / "cubic", "network.congestion_control=cubic")
    assert not any("other networks" in w for w in edgetwin.compare(twin, bbr).warnings)
    warnings = edgetwin.compare(bbr, cubic).warnings
    assert any("other networks (congestion_control bbr vs cubic)" in w for w in warnings)


def _pipeline_row(devices: int, batch: int, prompt: int, split: str) -> dict[str, object]:
    """A decoder pipeline row as ``compare`` reads it (the columns its key joins on)."""
    return {
        "strategy": "pipeline",
        "devices": devices,
        "batch": batch,
        "bandwidth_mbps": 400,
        "segments": None,
        "prompt_tokens": prompt,
        "output_tokens": 8,
        "layer_split": split,
    }


@pytest.mark.timeout(10)
def test_compare_names_every_layer_split_that_differs() -> None:
    """The warning named the first configuration's splits only: runs whose 2- and 4-board
    pipelines both ran other splits read as if only the 2-board one did."""
    from edgetwin.comparison import split_warning

    twin = [
        _pipeline_row(2, 1, 128, "9+7"),
        _pipeline_row(2, 8, 128, "9+7"),
        _pipeline_row(4, 1, 128, "4+5+5+2"),
        _pipeline_row(4, 1, 512, "4+4+4+4"),  # the same split on both sides
    ]
    local = [
        {**twin[0], "layer_split": "8+8"},
        {**twin[1], "layer_split": "8+8"},
        {**twin[2], "layer_split": "4+4+4+4"},
        twin[3],
    ]
    warning = split_warning(Path("twin"), twin, Path("local"), local)
    assert warning is not None
    assert warning.startswith("3 configurations ran other layer splits in twin than in local")
    assert "9+7 vs 8+8 in 2 (pipeline, 2 dev, batch 1, 400 Mbit/s, prompt 128, 8 out" in warning
    assert "4+5+5+2 vs 4+4+4+4 in 1 (pipeline, 4 dev, batch 1" in warning
    assert "prompt 512" not in warning


@pytest.mark.timeout(10)
def test_compare_counts_the_layer_splits_it_does_not_name() -> None:
    """More differing splits than a warning lists: the first few, then how many more."""
    from edgetwin.comparison import SHOWN_SPLITS, split_warning

    twin = [_pipeline_row(2, 1, 100 + n, f"{n + 1}+{16 - n - 1}") for n in range(SHOWN_SPLITS + 2)]
    local = [{**row, "layer_split": "8+8"} for row in twin]
    warning = split_warning(Path("twin"), twin, Path("local"), local)
    assert warning is not None
    assert warning.count(" vs 8+8 in 1 (") == SHOWN_SPLITS
    assert "and 2 more splits" in warning
