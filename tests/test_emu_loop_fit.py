"""The emu fit without root: a run folder the twin wrote with a known profile is fitted
back to that profile, and rows that are not the emulator's are refused."""

from __future__ import annotations

import csv
import hashlib
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from edgetwin.calibration.fit_emu import calibrate_from_emu
from edgetwin.cli import main
from edgetwin.device_spec import DeviceSpec
from edgetwin.errors import InputError
from edgetwin.resolved_scenario import dump_resolved
from edgetwin.result_cells import read_results
from edgetwin.results import write_results
from edgetwin.scenario import validate_scenario
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.runner import run_scenario
from tests.conftest import TOY_PROFILE, toy_scenario

EFFICIENCY = 0.955
# A CPU-like profile inside the emu fit's family (what calibrate-machine --emu fitted here).
TRUTH: dict[str, Any] = {
    "name": "truth",
    "ram_mb": 8000,
    "compute": {
        "throughput_gflops": 88.0,
        "launch_floor_ms": 0.5,
        "sync_host_ms": 0.0,
        "sync_host_ms_per_mb": 0.0,
        "rows_half_util": 15.0,
    },
    "staging": {"fixed_ms": 0.03, "ms_per_mb": 0.12, "size_exponent": 1.0},
    "network": {
        "message_overhead_ms": 1.0,
        "bandwidth_efficiency": EFFICIENCY,
        "duplex_efficiency": 0.8,
    },
    "power": {"idle_w": 0, "compute_w": 0, "host_w": 0, "staging_w": 0, "comm_w": 0},
}
FIT_SWEEP: dict[str, Any] = {
    "name": "fake_emu",
    "mode": "emu",
    "model": {"tokens": 197, "width": 384, "heads": 6, "blocks": 2},
    "devices": [{"name": "board", "profile": TRUTH, "count": 2}],
    "strategies": [{"name": "single"}, {"name": "voltage"}, {"name": "prism", "cr": 9.9}],
    "sweeps": [{"batch": [1, 4], "bandwidth_mbps": [200, 800], "devices": [2]}],
}


def fake_emu_run(folder: Path) -> Path:
    """What ``edgetwin run --mode emu`` writes, made by the twin with ``TRUTH``."""
    scenario = validate_scenario(FIT_SWEEP, folder / "fake.yaml")
    rows = [replace(o.row, mode="emu") for o in run_scenario(scenario, build_fleet(scenario, None))]
    folder.mkdir()
    write_results(folder / "results.csv", rows)
    (folder / "scenario.resolved.yaml").write_text(dump_resolved(scenario))
    with (folder / "link_check.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["bandwidth_mbps", "sender", "receiver", "goodput_mbps"])
        for rate in (200, 800):
            writer.writerow([rate, "etwh0", "etwh1", rate * EFFICIENCY])
    return folder


def spec_for(run: Path) -> Path:
    spec = run.parent / "spec.yaml"
    facts = {"name": "fitted", "ram_mb": 8000}
    spec.write_text(yaml.safe_dump({"kind": "emu", "profile": facts, "run": run.name}))
    return spec


def test_fit_recovers_the_profile_that_made_the_rows(tmp_path: Path) -> None:
    run = fake_emu_run(tmp_path / "run")
    profile = calibrate_from_emu(spec_for(run), "test")
    assert calibrate_from_emu(spec_for(run), "test") == profile  # same inputs, same profile
    assert profile.network.bandwidth_efficiency == EFFICIENCY  # from the link check
    assert profile.compute.throughput_gflops == pytest.approx(88.0, rel=0.02)
    assert profile.network.message_overhead_ms == pytest.approx(1.0, rel=0.05)
    assert profile.network.duplex_efficiency == pytest.approx(0.8, rel=0.02)
    assert max(profile.fit["median_abs_error_pct"].values()) < 1.0
    hashes = {s["file"]: s["sha256"] for s in profile.fit["sources"]}
    assert hashes["results.csv"] == hashlib.sha256((run / "results.csv").read_bytes()).hexdigest()
    assert set(hashes) == {"results.csv", "link_check.csv", "scenario.resolved.yaml"}
    assert profile.fit["rows"] == {"mode": "emu", "count": 12}


def test_rows_of_another_mode_are_refused_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = fake_emu_run(tmp_path / "run")
    results = run / "results.csv"
    text = results.read_text().splitlines()
    text[3] = text[3].replace(",emu,", ",twin,")
    results.write_text("\n".join(text) + "\n")
    with pytest.raises(InputError, match="line 4: mode 'twin'"):
        calibrate_from_emu(spec_for(run), "test")
    assert main(["calibrate-machine", "--emu", str(run), "--out", str(tmp_path / "m")]) == 2
    assert "emulator rows only" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_a_run_without_link_checks_is_fitted_only_with_the_efficiency_fixed(
    tmp_path: Path,
) -> None:
    """The fit takes bandwidth_efficiency from the link checks: a run that skipped them
    (``emulator.link_check_s`` 0, ``link_check.csv`` its header alone) says so; a spec
    that fixes the value needs none."""
    run = fake_emu_run(tmp_path / "run")
    scenario = validate_scenario({**FIT_SWEEP, "emulator": {"link_check_s": 0}}, run / "f.yaml")
    (run / "scenario.resolved.yaml").write_text(dump_resolved(scenario))
    (run / "link_check.csv").write_text("bandwidth_mbps,sender,receiver,goodput_mbps\n")
    with pytest.raises(InputError, match="link_check_s to 0") as raised:
        calibrate_from_emu(spec_for(run), "test")
    assert raised.value.path == str(run / "link_check.csv")
    spec = spec_for(run)
    spec.write_text(spec.read_text() + "fixed: {network.bandwidth_efficiency: 0.9}\n")
    assert calibrate_from_emu(spec, "test").network.bandwidth_efficiency == 0.9


def test_duplex_transfers_get_their_share_and_a_scatter_none(toy_profile_path: Path) -> None:
    """Voltage on the toy: a 1 ms scatter, then a 1 ms AllGather each way; at duplex share
    0.5 the AllGather (both ranks send) takes 2 ms, the scatter (rank 0 alone) still 1 ms."""
    times = {}
    for share in (1.0, 0.5):
        profile = {**TOY_PROFILE, "network": {**TOY_PROFILE["network"], "duplex_efficiency": share}}
        scenario = toy_scenario(toy_profile_path, input_source="terminal").model_copy(
            update={"devices": (DeviceSpec(name="dev", profile=profile, count=2),)}
        )
        times[share] = next(run_scenario(scenario, build_fleet(scenario, None))).row.comm_ms
    gather_ms = 1.0
    assert times[0.5] - times[1.0] == pytest.approx(gather_ms)


@pytest.mark.timeout(300)
def test_the_written_spec_refits_to_the_same_profile(tmp_path: Path) -> None:
    """``calibrate-machine --emu RUN --out M1`` wrote M1/spec.yaml with ``run`` relative to
    its staging folder (``../../run``, one level too deep), so calibrating that spec said
    the run "is not a folder": it is relative to M1 now, and refits to the same profile."""
    run = fake_emu_run(tmp_path / "run")
    out = tmp_path / "M1"
    assert main(["calibrate-machine", "--emu", str(run), "--out", str(out)]) == 0
    assert yaml.safe_load((out / "spec.yaml").read_text())["run"] == "../run"
    refitted = tmp_path / "refitted.yaml"
    assert main(["calibrate", str(out / "spec.yaml"), "--out", str(refitted)]) == 0
    first, again = (yaml.safe_load(path.read_text()) for path in (out / "profile.yaml", refitted))
    for profile in (first, again):
        del profile["fit"]["command"]
    assert again == first


EMU_LOOP_FIT = Path(__file__).resolve().parents[1] / "data/traces/emu-vit-loop-2026-12/fit"


@pytest.mark.parametrize("edit", ["empty cell", "no column"])
def test_a_run_without_a_rows_total_names_the_file_column_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: str
) -> None:
    """Each configuration is represented by its fastest repetition, by ``total_ms``: a
    hand-edited results.csv of a real emulator run (two repetitions a configuration)
    without it, an empty cell or the column gone, ended in a KeyError traceback."""
    run = tmp_path / "run"
    shutil.copytree(EMU_LOOP_FIT, run)
    results = run / "results.csv"
    rows = list(csv.reader(results.open(newline="")))
    column = rows[0].index("total_ms")
    if edit == "empty cell":
        rows[2][column] = ""  # line 3: the second repetition of line 2's configuration
    else:
        rows = [row[:column] + row[column + 1 :] for row in rows]
    with results.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    line = "line 3: empty cell" if edit == "empty cell" else "line 1: missing column"
    with pytest.raises(InputError, match=line) as raised:
        calibrate_from_emu(spec_for(run), "test")
    assert (raised.value.path, raised.value.field) == (str(results), "total_ms")
    assert main(["calibrate", str(spec_for(run)), "--out", str(tmp_path / "p.yaml")]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert not (tmp_path / "p.yaml").exists()


@pytest.mark.parametrize("blank", ["", "  "], ids=["empty", "spaces"])
def test_an_empty_status_reads_as_ok_as_every_results_reader_reads_it(
    tmp_path: Path, blank: str
) -> None:
    """edgetwin writes every row's status (``ok`` or why the run failed); a hand-made or
    hand-edited table may leave a finished run's empty, which ``load_results``, ``report``,
    ``compare`` and a measured table's reader read as ``ok``. The emu fit refused it as
    ``a failed run: `` with nothing after the colon."""
    run, shipped_run = tmp_path / "edited" / "run", tmp_path / "shipped" / "run"
    shutil.copytree(EMU_LOOP_FIT, run)
    shutil.copytree(EMU_LOOP_FIT, shipped_run)
    results = run / "results.csv"
    rows = list(csv.reader(results.open(newline="")))
    rows[2][rows[0].index("status")] = blank
    with results.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    edited = calibrate_from_emu(spec_for(run), "test")
    shipped = calibrate_from_emu(spec_for(shipped_run), "test")
    assert edited.compute == shipped.compute and edited.network == shipped.network
    assert edited.fit["median_abs_error_pct"] == shipped.fit["median_abs_error_pct"]
    assert all(row.ok for row in read_results(results))  # as the run's folder reads
    rows[2][rows[0].index("status")] = "out of memory on etwh1"  # a failed run is refused
    with results.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    with pytest.raises(InputError, match="line 3: a failed run: out of memory on etwh1"):
        calibrate_from_emu(spec_for(run), "test")
