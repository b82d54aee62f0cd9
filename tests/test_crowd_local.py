"""``--mode local`` for a crowd scenario: the real CROWDio foreman and a worker process per
phone on loopback (no root, no Mininet). It used to run the twin without a word, its rows
saying mode twin."""

from __future__ import annotations

from pathlib import Path

import pytest

import edgetwin
from edgetwin.cli import main
from edgetwin.emu.crowdio.launcher import WORKER
from edgetwin.models.strategy import CROWDIO_FOREMAN
from edgetwin.scenario import load_scenario, unplayed_settings
from tests.conftest import REPO

SCENARIO = REPO / "scenarios/emu_crowdio.yaml"
STREAMING = "strategies=[{name: crowdio_streaming}]"


def _pipeline_pids() -> set[int]:
    """Processes running the foreman's or a worker's module."""
    pids = set()
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # not a process, or gone meanwhile
        if any(arg.decode(errors="replace") in (WORKER, CROWDIO_FOREMAN) for arg in argv):
            pids.add(int(entry.name))
    return pids


@pytest.mark.timeout(300)
def test_a_crowd_scenario_in_local_mode_runs_the_real_pipeline(tmp_path: Path) -> None:
    before = _pipeline_pids()
    out = tmp_path / "local"
    argv = ["run", str(SCENARIO), "--mode", "local", "--out", str(out), "--set", STREAMING]
    assert main([*argv, "--quiet"]) == 0
    rows = edgetwin.load_results(out).rows
    # a run per swept (nominal) bandwidth, as the twin and the emulator have
    assert [(r.mode, r.strategy, r.bandwidth_mbps) for r in rows] == [
        ("local", "crowdio_streaming", 10),
        ("local", "crowdio_streaming", 100),
    ]
    for row in rows:
        assert row.status == "ok" and row.devices == 3 and row.inputs == 5, row
        assert row.cold_loads is not None and row.cold_loads >= 3  # cold caches: every stage
        assert row.bytes_moved is not None and row.bytes_moved > 0
    assert "the bandwidth is nominal" in (out / "report.html").read_text()
    assert _pipeline_pids() <= before  # the foreman and every worker it started are gone


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (
            ["--set", "emulator.faults=[{kind: kill_worker, host: 1, at_s: 0.1}]"],
            "field 'emulator.faults'",
        ),
        (["--trace"], "--trace (trace=True in Python)"),
    ],
)
def test_local_mode_refuses_what_loopback_cannot_play(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], named: str
) -> None:
    for check in ([], ["--check"]):
        out = tmp_path / "out"
        argv = ["run", str(SCENARIO), "--mode", "local", "--out", str(out), *extra, *check]
        assert main(argv) == 2
        error = capsys.readouterr().err
        assert named in error and "Traceback" not in error, error
        assert not out.exists()


def test_what_a_real_crowd_run_does_not_play_is_said() -> None:
    """A local run of crowd_city played none of its churn, its stream of jobs or its
    30 ms latency, and said nothing (one job, 139 ms, where the twin took 10-14 s)."""
    city = load_scenario(
        REPO / "scenarios/crowd_city.yaml", ["network.schedule=[{at_ms: 1000, bandwidth_mbps: 5}]"]
    )
    local = unplayed_settings(city, "local")
    churn = [f"crowd.fleet.{k}.availability is set" for k in range(3)]
    for said in (*churn, "crowd.job.interarrival", "network.latency_ms", "network.schedule"):
        assert sum(said in warning for warning in local) == 1, (said, local)
    for shaped in ("network.latency_ms", "network.schedule"):  # as a Python caller asks
        warning = next(warning for warning in local if warning.startswith(shaped))
        assert warning.endswith("only --mode emu (mode='emu' in Python) plays it"), warning
    emu = unplayed_settings(city, "emu")  # the emulator shapes the network
    assert len(emu) == 4 and not any("network." in warning for warning in emu)
    assert unplayed_settings(city, "twin") == []
    assert unplayed_settings(load_scenario(SCENARIO), "local") == []


def test_too_many_stages_for_the_tiny_model_names_the_model_that_makes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said only "the tiny DistilBERT makes at most 5 stages"; the full one makes 7."""
    six = REPO / "scenarios/crowdio_6stage.yaml"
    argv = ["run", str(six), "--mode", "local", "--check", "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "field 'crowd.job.stages': the tiny DistilBERT makes at most 5 stages" in error
    assert "; emulator.model: full makes up to 7" in error
    assert main([*argv, "--set", "emulator.model=full"]) == 0
